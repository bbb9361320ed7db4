// Habits a CLI user brings along: `sparkctl ps` means status, `run` means up, `stop` means down, and a
// typo one or two letters off means the verb it resembles. Also the argv scan main.cpp does before CLI11
// parses: the first verb word (global options and their values skipped) and whether --json was asked.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace spk::cli {

// The first word of argv that is not a global option or its value; nullopt when there is none or
// when help/version is asked before it.
std::optional<std::string> first_verb_word(int argc, char** argv);
bool wants_json(int argc, char** argv);  // --json anywhere before a lone "--"
bool is_known(const std::string& word, const std::vector<std::string>& verbs);

// " (did you mean `status`?)" from the alias table or the closest verb within edit distance 2; a hint
// to `--help` otherwise.
std::string suggest_verb(const std::string& word, const std::vector<std::string>& verbs);

// Levenshtein distance (exposed for tests).
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace spk::cli
