// ExtendedResourceClasses and NodeAllocatableResources edge cases that the case files cannot
// reach (the case files drive SynthesizeExtendedResourceClaim through Scenario).
#include "devlet/allocator/extended_resources.h"

#include "gtest/gtest.h"

namespace devlet::allocator {
namespace {

kube::DeviceClass Class(std::string name, std::optional<std::string> resource = std::nullopt) {
  kube::DeviceClass c;
  c.metadata.name = std::move(name);
  c.spec.extended_resource_name = std::move(resource);
  return c;
}

TEST(ExtendedResourceClasses, ExplicitBeforeImplicitAndUnknownClasses) {
  // class-b declares the implicit name of class-a: the explicit declaration wins.
  auto index = ExtendedResourceClasses::Build(
      {Class("class-a"), Class("class-b", "deviceclass.resource.kubernetes.io/class-a")});
  EXPECT_EQ(index.ClassFor("deviceclass.resource.kubernetes.io/class-a"), "class-b");
  EXPECT_EQ(index.ClassFor("deviceclass.resource.kubernetes.io/class-b"), "class-b");
  EXPECT_EQ(index.ClassFor("deviceclass.resource.kubernetes.io/class-c"), std::nullopt);
  EXPECT_EQ(index.ClassFor("deviceclass.resource.kubernetes.io/"), std::nullopt);
  EXPECT_EQ(index.ClassFor("example.com/gpu"), std::nullopt);
  EXPECT_EQ(index.ClassFor(""), std::nullopt);
}

TEST(NodeAllocatableResources, MalformedStatusIsEmpty) {
  kube::Node node;
  for (const char* extra : {"", "not json", "[]", R"({"status": 1})", R"({"status": {}})",
                            R"({"status": {"allocatable": []}})"}) {
    node.extra.json = extra;
    EXPECT_TRUE(NodeAllocatableResources(node).empty()) << extra;
  }
  node.extra.json =
      R"({"status": {"allocatable": {"cpu": "4", "example.com/gpu": "2", "zero": "0",
          "bad": "x", "number": 3, "null": null}}})";
  EXPECT_EQ(NodeAllocatableResources(node),
            (std::set<std::string>{"cpu", "example.com/gpu", "number"}));
}

TEST(SynthesizeExtendedResourceClaim, NegativeAndHugeQuantitiesAreErrors) {
  auto index = ExtendedResourceClasses::Build({Class("class-a", "example.com/gpu")});
  kube::Pod pod;
  pod.metadata.name = "p";
  pod.spec.containers.emplace_back();
  pod.spec.containers[0].name = "c";
  for (const char* q : {"-1", "1.5", "1e30"}) {
    pod.spec.containers[0].resources.requests["example.com/gpu"] = kube::Quantity::Parse(q).value();
    auto out = SynthesizeExtendedResourceClaim(Features{}, pod, index);
    EXPECT_FALSE(out.ok()) << q;
  }
}

}  // namespace
}  // namespace devlet::allocator
