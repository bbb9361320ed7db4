// The front's HTTP/1.1 framing (request_head.h): heads found and parsed only when complete, caps on
// head size and field count, body framing decisions (411/413/400/501), and the chunked decoder fed one
// byte at a time and in one piece, with its cap enforced on the decoded size.
#include "runtime/serve/request_head.h"

#include <gtest/gtest.h>

namespace spk::rt {
namespace {

TEST(RequestHead, ParsesOnlyACompleteHead) {
  const std::string h =
      "\r\nPOST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length:  5 \r\n\r\nhello";
  for (size_t n = 0; n < h.size() - 5; ++n)
    EXPECT_EQ(parse_head(std::string_view(h).substr(0, n), 1024).state, HeadState::incomplete) << n;
  auto p = parse_head(h, 1024);
  ASSERT_EQ(p.state, HeadState::complete);
  EXPECT_EQ(p.head_bytes, h.size() - 5);
  EXPECT_EQ(p.head.method, "POST");
  EXPECT_EQ(p.head.path, "/v1/completions");
  EXPECT_EQ(p.head.target, "/v1/completions?x=1");
  EXPECT_EQ(*p.head.field("content-length"), "5");
  EXPECT_TRUE(p.head.keep_alive());
  auto f = body_framing(p.head, true, 100);
  EXPECT_EQ(f.kind, BodyFraming::sized);
  EXPECT_EQ(f.length, 5u);
  EXPECT_FALSE(parse_head("GET / HTTP/1.0\r\n\r\n", 64).head.keep_alive());
}

TEST(RequestHead, RefusesBadAndOversizedHeads) {
  EXPECT_EQ(parse_head("GET / HTTP/1.1\r\nX: " + std::string(100, 'a'), 64).state, HeadState::too_large);
  EXPECT_EQ(parse_head("GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n", 64).state,
            HeadState::too_large);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 101; ++i) many += "A: b\r\n";
  EXPECT_EQ(parse_head(many + "\r\n", 1 << 20).state, HeadState::too_large);
  for (const char* b :
       {"GET /\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", "GET x HTTP/1.1\r\n\r\n", "GET / HTTP/2\r\n\r\n",
        "GET / HTTP/1.1\r\nNo colon\r\n\r\n", "GET / HTTP/1.1\r\n folded: x\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", "G(T / HTTP/1.1\r\n\r\n"})
    EXPECT_EQ(parse_head(b, 1024).state, HeadState::bad) << b;
}

TEST(RequestHead, BodyFraming) {
  auto head = [](const std::string& fields) {
    return parse_head("POST / HTTP/1.1\r\n" + fields + "\r\n", 4096).head;
  };
  EXPECT_EQ(body_framing(head(""), true, 10).status, 411);
  EXPECT_EQ(body_framing(head(""), false, 10).kind, BodyFraming::none);
  EXPECT_EQ(body_framing(head("Content-Length: 11\r\n"), true, 10).status, 413);
  EXPECT_EQ(body_framing(head("Content-Length: 99999999999999999999\r\n"), true, 10).status, 400);
  EXPECT_EQ(body_framing(head("Content-Length: -1\r\n"), true, 10).status, 400);
  EXPECT_EQ(body_framing(head("Content-Length: 3\r\nContent-Length: 4\r\n"), true, 10).status, 400);
  EXPECT_EQ(body_framing(head("Content-Length: 3\r\nContent-Length: 3\r\n"), true, 10).length, 3u);
  EXPECT_EQ(body_framing(head("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n"), true, 10).status, 400);
  EXPECT_EQ(body_framing(head("Transfer-Encoding: gzip, chunked\r\n"), true, 10).status, 501);
  EXPECT_EQ(body_framing(head("Transfer-Encoding: Chunked\r\n"), true, 10).kind, BodyFraming::chunked);
}

TEST(RequestHead, ChunkedDecoder) {
  const std::string body =
      "4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  {
    ChunkedDecoder d(1000);
    std::string out;
    const size_t used = d.feed(body, out);
    EXPECT_TRUE(d.done());
    EXPECT_EQ(out, "Wikipedia in\r\n\r\nchunks.");
    EXPECT_EQ(body.substr(used), "NEXT");
  }
  {
    ChunkedDecoder d(1000);
    std::string out;
    size_t used = 0;
    for (size_t i = 0; i < body.size() && !d.done(); ++i) used += d.feed(body.substr(i, 1), out);
    EXPECT_TRUE(d.done());
    EXPECT_EQ(out, "Wikipedia in\r\n\r\nchunks.");
    EXPECT_EQ(body.substr(used), "NEXT");
  }
  {
    ChunkedDecoder d(8);  // the cap applies to the decoded size, before the data arrives
    std::string out;
    d.feed("5\r\nabcde\r\n4\r\n", out);
    EXPECT_TRUE(d.failed());
    EXPECT_TRUE(d.too_large());
    EXPECT_EQ(out, "abcde");
  }
  for (const char* b : {"zz\r\n", "5\r\nabcdeXX\r\n", "fffffffffffffffff\r\n"}) {
    ChunkedDecoder d(1u << 30);
    std::string out;
    d.feed(b, out);
    EXPECT_TRUE(d.failed()) << b;
  }
}

}  // namespace
}  // namespace spk::rt
