// Small syntax checks shared by the recipe and inventory loaders.
#pragma once

#include <cstdint>
#include <string_view>

namespace spk {

bool is_ipv4(std::string_view s);         // dotted quad, each part 0..255, no leading zeros
bool is_cidr(std::string_view s);         // "10.0.0.1/24": is_ipv4 + prefix 0..32
bool is_env_name(std::string_view s);     // [A-Za-z_][A-Za-z0-9_]*
bool is_name(std::string_view s);         // [a-z0-9][a-z0-9._-]{0,62}: lane and node names
bool is_hub_id(std::string_view s);       // "org/name" of [A-Za-z0-9._-]
bool is_commit_hash(std::string_view s);  // 40 lowercase hex digits
inline bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace spk
