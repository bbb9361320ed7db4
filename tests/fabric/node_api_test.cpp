// The JSON entry point the orchestrator's `sparkctl node` uses, on the fake Spark pair.
#include "fabric/node_api.h"

#include <gtest/gtest.h>

#include "tests/fabric/spark_pair.h"

namespace spk::fabric {
namespace {
using namespace testing;

nlohmann::json addresses(const FakeNode& n) {
  nlohmann::json links = nlohmann::json::array();
  for (auto& [name, l] : n.net.links) links.push_back(l);
  return {{"addresses", n.net.addrs}, {"links", links}};
}

TEST(FabricNodeApi, EnvPerNodeFromJson) {
  auto a = spark_a(), b = spark_b();
  for (auto* n : {&a, &b}) {
    nlohmann::json req = {{"discover", {{"node", n->name}, {"sysfs_root", n->sysfs->root()}}},
                          {"env", {{"gid", {{"fabric_cidr", n->cidr}}}}},
                          {"addresses", addresses(*n)}};
    auto r = run_node_request("fabric-env", req);
    ASSERT_TRUE(r.ok()) << r.error().what();
    EXPECT_EQ((*r)["vars"]["NCCL_IB_GID_INDEX"]["value"], n == &a ? "3" : "5");
  }
}

TEST(FabricNodeApi, ShowDoctorAndErrors) {
  auto b = spark_b();
  auto show = run_node_request(
      "fabric-show", {{"node", "spark-b"}, {"sysfs_root", b.sysfs->root()}, {"addresses", addresses(b)}});
  ASSERT_TRUE(show.ok()) << show.error().what();
  EXPECT_EQ((*show)["devices"].size(), 2u);
  auto doc = run_node_request("fabric-doctor", {{"node", "spark-b"},
                                                {"sysfs_root", b.sysfs->root()},
                                                {"fabric_cidr", b.cidr},
                                                {"skip", {"nccl"}},
                                                {"addresses", addresses(b)}});
  ASSERT_TRUE(doc.ok()) << doc.error().what();
  EXPECT_FALSE((*doc)["ok"].get<bool>()) << "the down half is a failed finding";
  EXPECT_FALSE(run_node_request("fabric-frob", nlohmann::json::object()).ok());
  auto bad = run_node_request("fabric-doctor", {{"mtu", "nine thousand"}, {"addresses", addresses(b)}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("bad request"), std::string::npos);
}

}  // namespace
}  // namespace spk::fabric
