#include "runtime/chat/jinja_lexer.h"

#include <array>
#include <string_view>
#include <utility>

#include "runtime/chat/jinja_value.h"
#include "runtime/chat/js_string.h"

namespace spk::rt::jinja {

const char* tok_name(Tok t) {
  static const char* names[] = {"Text",
                                "NumericLiteral",
                                "StringLiteral",
                                "Identifier",
                                "Equals",
                                "OpenParen",
                                "CloseParen",
                                "OpenStatement",
                                "CloseStatement",
                                "OpenExpression",
                                "CloseExpression",
                                "OpenSquareBracket",
                                "CloseSquareBracket",
                                "OpenCurlyBracket",
                                "CloseCurlyBracket",
                                "Comma",
                                "Dot",
                                "Colon",
                                "Pipe",
                                "AdditiveBinaryOperator",
                                "MultiplicativeBinaryOperator",
                                "ExponentiationBinaryOperator",
                                "ComparisonBinaryOperator",
                                "UnaryOperator",
                                "Comment"};
  return names[static_cast<int>(t)];
}

namespace {

// Source text plus the original line of each byte; preprocessing only deletes bytes.
struct Src {
  std::string text;
  std::vector<int> line;
  void push(char c, int l) {
    text += c;
    line.push_back(l);
  }
};

Src preprocess(const std::string& source) {
  Src s;
  int l = 1;
  for (char c : source) {
    s.push(c, l);
    if (c == '\n') ++l;
  }
  if (!s.text.empty() && s.text.back() == '\n') {
    s.text.pop_back();
    s.line.pop_back();
  }
  // lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1"
  Src a;
  const std::string& t = s.text;
  for (size_t i = 0; i < t.size();) {
    const bool line_start = i == 0 || t[i - 1] == '\n' || t[i - 1] == '\r';
    if (line_start) {
      size_t j = i;
      while (j < t.size() && (t[j] == ' ' || t[j] == '\t')) ++j;
      if (j > i && j + 1 < t.size() && t[j] == '{' &&
          (t[j + 1] == '#' || t[j + 1] == '%' || t[j + 1] == '-')) {
        i = j;  // drop the indentation; the '{' itself is copied below
      }
    }
    a.push(t[i], s.line[i]);
    ++i;
  }
  // trim_blocks: /([#%-]})\n/g -> "$1"
  Src b;
  const std::string& u = a.text;
  for (size_t i = 0; i < u.size(); ++i) {
    b.push(u[i], a.line[i]);
    if (u[i] == '}' && i >= 1 && (u[i - 1] == '#' || u[i - 1] == '%' || u[i - 1] == '-') &&
        i + 1 < u.size() && u[i + 1] == '\n') {
      ++i;  // skip the newline
    }
  }
  // transformers' {% generation %} / {% endgeneration %} markers are dropped, with the whitespace
  // around them unless the tag has '-' on that side:
  // /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs -> (lstrip ? "" : before) + (rstrip ? "" : after)
  Src c;
  const std::string& v = b.text;
  size_t i = 0;
  while (i < v.size()) {
    const size_t ws = js_space_run_forward(v, i);
    size_t p = i + ws;
    bool tag = v.compare(p, 2, "{%") == 0;
    bool lstrip = false, rstrip = false;
    if (tag) {
      p += 2;
      if (p < v.size() && v[p] == '-') {
        lstrip = true;
        ++p;
      }
      p += js_space_run_forward(v, p);
      if (v.compare(p, 3, "end") == 0 && v.compare(p + 3, 10, "generation") == 0) p += 3;
      tag = v.compare(p, 10, "generation") == 0;
      p += 10;
      if (tag) {
        p += js_space_run_forward(v, p);
        if (p < v.size() && v[p] == '-') {
          rstrip = true;
          ++p;
        }
        tag = v.compare(p, 2, "%}") == 0;
        p += 2;
      }
    }
    if (!tag) {
      const size_t end = ws ? i + ws : i + 1;  // copy the whitespace run (or one byte) unchanged
      for (size_t k = i; k < end; ++k) c.push(v[k], b.line[k]);
      i = end;
      continue;
    }
    const size_t after = js_space_run_forward(v, p);
    if (!lstrip)
      for (size_t k = i; k < i + ws; ++k) c.push(v[k], b.line[k]);
    if (!rstrip)
      for (size_t k = p; k < p + after; ++k) c.push(v[k], b.line[k]);
    i = p + after;
  }
  return c;
}

constexpr std::array<std::pair<std::string_view, Tok>, 30> kTable{{
    {"{%", Tok::OpenStatement},  {"%}", Tok::CloseStatement},
    {"{{", Tok::OpenExpression}, {"}}", Tok::CloseExpression},
    {"(", Tok::OpenParen},       {")", Tok::CloseParen},
    {"{", Tok::OpenCurly},       {"}", Tok::CloseCurly},
    {"[", Tok::OpenSquare},      {"]", Tok::CloseSquare},
    {",", Tok::Comma},           {".", Tok::Dot},
    {":", Tok::Colon},           {"|", Tok::Pipe},
    {"<=", Tok::Comparison},     {">=", Tok::Comparison},
    {"==", Tok::Comparison},     {"!=", Tok::Comparison},
    {"<", Tok::Comparison},      {">", Tok::Comparison},
    {"+", Tok::Additive},        {"-", Tok::Additive},
    {"~", Tok::Additive},        {"**", Tok::Power},
    {"*", Tok::Multiplicative},  {"//", Tok::Multiplicative},
    {"/", Tok::Multiplicative},  {"%", Tok::Multiplicative},
    {"=", Tok::Equals},          {"", Tok::Text},
}};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
  const Src s = preprocess(source);
  const std::string& src = s.text;
  const size_t n = src.size();
  std::vector<Token> tokens;
  size_t pos = 0;
  int curly_depth = 0;
  auto line_at = [&](size_t p) { return p < n ? s.line[p] : (n ? s.line[n - 1] : 1); };
  auto fail = [&](const std::string& msg) -> JinjaError { return JinjaError(msg, line_at(pos)); };
  auto at = [&](size_t p) { return p < n ? src[p] : '\0'; };
  auto starts = [&](std::string_view w) { return src.compare(pos, w.size(), w) == 0; };

  // consumeWhile: also decodes backslash escapes (only string literals ever contain them).
  auto consume_while = [&](auto pred) {
    std::string out;
    while (pos < n && pred(src[pos])) {
      if (src[pos] == '\\') {
        ++pos;
        if (pos >= n) throw fail("unexpected end of template (unterminated string literal or tag)");
        const char e = src[pos++];
        if (e == 'x' || e == 'u') {
          const size_t len = e == 'x' ? 2 : 4;
          const std::string hex = src.substr(pos, len);
          bool ok = hex.size() == len;
          for (char h : hex) ok = ok && std::isxdigit(static_cast<unsigned char>(h));
          if (!ok) throw fail(std::string("Invalid hexadecimal escape sequence: \\") + e + hex);
          utf8_append(out, static_cast<char32_t>(std::stoul(hex, nullptr, 16)));
          pos += len;
          continue;
        }
        switch (e) {
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'v':
            out += '\v';
            break;
          case '\'':
            out += '\'';
            break;
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          default:
            throw fail(std::string("Unexpected escaped character: ") + e);
        }
        continue;
      }
      out += src[pos++];
      if (pos >= n) throw fail("unexpected end of template (unterminated string literal or tag)");
    }
    return out;
  };
  auto strip_trailing = [&] {
    if (!tokens.empty() && tokens.back().type == Tok::Text) {
      std::string& v = tokens.back().value;
      v.resize(v.size() - js_space_run_backward(v, v.size()));
      if (v.empty()) tokens.pop_back();
    }
  };
  auto skip_leading = [&] { pos += js_space_run_forward(src, pos); };
  auto push = [&](Tok t, std::string v, size_t at_pos) {
    tokens.push_back({t, std::move(v), line_at(at_pos)});
  };

  while (pos < n) {
    const Tok* last = tokens.empty() ? nullptr : &tokens.back().type;
    if (!last || *last == Tok::CloseStatement || *last == Tok::CloseExpression || *last == Tok::Comment) {
      const size_t start = pos;
      while (pos < n &&
             !(src[pos] == '{' && (at(pos + 1) == '%' || at(pos + 1) == '{' || at(pos + 1) == '#')))
        ++pos;
      if (pos > start) {
        push(Tok::Text, src.substr(start, pos - start), start);
        continue;
      }
    }
    if (src[pos] == '{' && at(pos + 1) == '#') {
      const size_t start = pos;
      pos += 2;
      const bool strip_before = at(pos) == '-';
      if (strip_before) ++pos;
      std::string comment;
      while (at(pos) != '#' || at(pos + 1) != '}') {
        if (pos + 2 >= n) throw JinjaError("Missing end of comment tag", line_at(start));
        comment += src[pos++];
      }
      const bool strip_after = !comment.empty() && comment.back() == '-';
      if (strip_after) comment.pop_back();
      if (strip_before) strip_trailing();
      push(Tok::Comment, comment, start);
      pos += 2;
      if (strip_after) skip_leading();
      continue;
    }
    if (starts("{%-")) {
      strip_trailing();
      push(Tok::OpenStatement, "{%", pos);
      pos += 3;
      continue;
    }
    if (starts("{{-")) {
      strip_trailing();
      push(Tok::OpenExpression, "{{", pos);
      curly_depth = 0;
      pos += 3;
      continue;
    }
    consume_while(
        [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; });
    if (pos >= n) break;
    if (starts("-%}")) {
      push(Tok::CloseStatement, "%}", pos);
      pos += 3;
      skip_leading();
      continue;
    }
    if (starts("-}}")) {
      push(Tok::CloseExpression, "}}", pos);
      pos += 3;
      skip_leading();
      continue;
    }
    const char c = src[pos];
    if (c == '-' || c == '+') {
      if (!last || *last == Tok::Text) throw fail(std::string("Unexpected character: ") + c);
      const Tok lt = *last;
      if (lt != Tok::Ident && lt != Tok::Number && lt != Tok::String && lt != Tok::CloseParen &&
          lt != Tok::CloseSquare) {
        const size_t start = pos++;
        std::string num = consume_while(is_digit);
        if (!num.empty() && at(pos) == '.' && is_digit(at(pos + 1))) {
          ++pos;
          num += "." + consume_while(is_digit);
        }
        push(num.empty() ? Tok::Unary : Tok::Number, std::string(1, c) + num, start);
        continue;
      }
    }
    bool matched = false;
    for (const auto& [seq, type] : kTable) {
      if (seq.empty()) break;
      if (seq == "}}" && curly_depth > 0) continue;
      if (starts(seq)) {
        push(type, std::string(seq), pos);
        if (type == Tok::OpenExpression) {
          curly_depth = 0;
        } else if (type == Tok::OpenCurly) {
          ++curly_depth;
        } else if (type == Tok::CloseCurly) {
          --curly_depth;
        }
        pos += seq.size();
        matched = true;
        break;
      }
    }
    if (matched) continue;
    if (c == '\'' || c == '"') {
      const size_t start = pos++;
      std::string str = consume_while([c](char x) { return x != c; });
      if (pos >= n) throw JinjaError("Unterminated string literal", line_at(start));
      push(Tok::String, std::move(str), start);
      ++pos;
      continue;
    }
    if (is_digit(c)) {
      const size_t start = pos;
      std::string num = consume_while(is_digit);
      if (!(last && *last == Tok::Dot) && at(pos) == '.' && is_digit(at(pos + 1))) {
        ++pos;
        num += "." + consume_while(is_digit);
      }
      push(Tok::Number, std::move(num), start);
      continue;
    }
    if (is_word(c)) {
      const size_t start = pos;
      push(Tok::Ident, consume_while(is_word), start);
      continue;
    }
    throw fail(std::string("Unexpected character: ") + c);
  }
  return tokens;
}

}  // namespace spk::rt::jinja
