#include "devlet/kube/codec.h"

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "devlet/common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace devlet::kube {
namespace {

using ::devlet::kube::testing::ReadTestData;
using ::devlet::testing::IsOk;
using ::devlet::testing::IsOkAndHolds;
using ::devlet::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

template <typename T>
T DecodeFile(const std::string& name) {
  absl::StatusOr<T> object = DecodeOne<T>(ReadTestData(name), {.source = name});
  EXPECT_THAT(object, IsOk());
  return object.ok() ? *std::move(object) : T{};
}

TEST(DecodeTest, ResourceSliceV1) {
  const ResourceSlice slice = DecodeFile<ResourceSlice>("slice_v1.yaml");
  EXPECT_EQ(slice.metadata.name, "node-1-gpu.example.com-abcde");
  EXPECT_EQ(slice.metadata.uid, "2b7f6c4e-1d3a-4f5b-9c8d-0e1f2a3b4c5d");
  EXPECT_EQ(slice.metadata.resource_version, "4711");
  EXPECT_EQ(slice.metadata.generation, 3);
  EXPECT_THAT(slice.metadata.creation_timestamp, Optional(std::string("2026-12-02T16:01:23Z")));
  ASSERT_EQ(slice.metadata.owner_references.size(), 1u);
  EXPECT_THAT(slice.metadata.owner_references[0].controller, Optional(true));
  EXPECT_EQ(slice.metadata.extra.json,
            R"({"managedFields":[{"manager":"devlet","operation":"Apply"}]})");
  EXPECT_EQ(slice.spec.driver, "gpu.example.com");
  EXPECT_EQ(slice.spec.pool.generation, 7);
  EXPECT_EQ(slice.spec.pool.resource_slice_count, 2);
  EXPECT_THAT(slice.spec.per_device_node_selection, Optional(true));
  ASSERT_EQ(slice.spec.devices.size(), 3u);

  const Device& gpu = slice.spec.devices[0];
  EXPECT_THAT(gpu.node_name, Optional(std::string("node-1")));
  EXPECT_EQ(gpu.attributes.at("model").kind(), DeviceAttribute::Kind::kString);
  EXPECT_THAT(gpu.attributes.at("numaNode").int_value, Optional(0));
  EXPECT_THAT(gpu.attributes.at("mig").bool_value, Optional(true));
  EXPECT_THAT(gpu.attributes.at("driverVersion").version_value,
              Optional(std::string("1.2.3-rc.1+build.5")));
  EXPECT_THAT(gpu.attributes.at("gpu.example.com/pcieRoot").string_value,
              Optional(std::string("pci0000:00")));
  EXPECT_THAT(gpu.attributes.at("peers").int_values, Optional(ElementsAre(1, 2, 3)));
  EXPECT_THAT(gpu.attributes.at("flags").bool_values, Optional(ElementsAre(true, false)));
  EXPECT_THAT(gpu.attributes.at("tags").string_values, Optional(ElementsAre("a", "b")));
  EXPECT_THAT(gpu.attributes.at("versions").version_values,
              Optional(ElementsAre("1.0.0", "2.0.0")));
  EXPECT_EQ(gpu.capacity.at("memory").value.str(), "141Gi");
  EXPECT_EQ(gpu.capacity.at("slots").value.str(), "8");  // a YAML integer becomes a quantity
  const CapacityRequestPolicy& bandwidth = *gpu.capacity.at("bandwidth").request_policy;
  EXPECT_EQ(bandwidth.default_->str(), "10");
  EXPECT_EQ(bandwidth.valid_range->step->str(), "10");
  EXPECT_EQ(gpu.capacity.at("slots").request_policy->valid_values.size(), 4u);
  ASSERT_EQ(gpu.consumes_counters.size(), 1u);
  EXPECT_EQ(gpu.consumes_counters[0].counter_set, "gpu-0-counters");
  EXPECT_EQ(gpu.consumes_counters[0].counters.at("sms").value.str(), "132");
  EXPECT_THAT(gpu.consumes_counters[0].compatibility_groups, ElementsAre("full"));
  ASSERT_EQ(gpu.taints.size(), 1u);
  EXPECT_EQ(gpu.taints[0].effect, "NoSchedule");
  EXPECT_THAT(gpu.taints[0].time_added, Optional(std::string("2026-12-02T16:00:00Z")));
  EXPECT_THAT(gpu.binds_to_node, Optional(true));
  EXPECT_THAT(gpu.binding_conditions, ElementsAre("attached"));
  EXPECT_THAT(gpu.binding_failure_conditions, ElementsAre("attach-failed"));
  EXPECT_THAT(gpu.allow_multiple_allocations, Optional(true));
  EXPECT_EQ(gpu.node_allocatable_resources.at("memory").overhead->per_pod->str(), "1Gi");

  const NodeSelector& selector = *slice.spec.devices[1].node_selector;
  ASSERT_EQ(selector.node_selector_terms.size(), 1u);
  EXPECT_EQ(selector.node_selector_terms[0].match_expressions[0].operator_, "In");
  EXPECT_EQ(selector.node_selector_terms[0].match_fields[0].key, "metadata.name");
  EXPECT_THAT(slice.spec.devices[2].all_nodes, Optional(true));
}

TEST(DecodeTest, ResourceSliceV1beta1ConvertsToV1) {
  EXPECT_EQ(DecodeFile<ResourceSlice>("slice_v1beta1.yaml"),
            DecodeFile<ResourceSlice>("slice_v1.yaml"));
}

TEST(DecodeTest, ResourceClaimV1) {
  const ResourceClaim claim = DecodeFile<ResourceClaim>("claim_v1.yaml");
  EXPECT_EQ(claim.metadata.namespace_, "ml");
  const DeviceClaim& devices = claim.spec.devices;
  ASSERT_EQ(devices.requests.size(), 3u);
  const ExactDeviceRequest& gpus = *devices.requests[0].exactly;
  EXPECT_EQ(gpus.device_class_name, "gpu.example.com");
  EXPECT_EQ(gpus.count, 2);
  EXPECT_THAT(gpus.admin_access, Optional(false));
  ASSERT_EQ(gpus.tolerations.size(), 2u);
  EXPECT_EQ(gpus.tolerations[1].operator_, "Equal");  // defaulted
  EXPECT_THAT(gpus.tolerations[1].toleration_seconds, Optional(300));
  EXPECT_EQ(gpus.capacity->requests.at("bandwidth").str(), "20");
  const DeviceRequest& nic = devices.requests[1];
  EXPECT_FALSE(nic.exactly.has_value());
  ASSERT_EQ(nic.first_available.size(), 2u);
  EXPECT_EQ(nic.first_available[0].allocation_mode, "ExactCount");  // defaulted
  EXPECT_EQ(nic.first_available[0].count, 1);                       // defaulted
  EXPECT_EQ(nic.first_available[1].allocation_mode, "All");
  EXPECT_EQ(nic.first_available[1].count, 0);
  EXPECT_THAT(devices.constraints[0].match_attribute,
              Optional(std::string("gpu.example.com/pcieRoot")));
  EXPECT_THAT(devices.constraints[1].distinct_attribute,
              Optional(std::string("gpu.example.com/uuid")));
  // Opaque parameters are kept as written: key order, numbers, nulls.
  EXPECT_EQ(devices.config[0].opaque->parameters.json,
            R"({"apiVersion":"gpu.example.com/v1","kind":"GpuConfig","sharing":{"strategy":)"
            R"("TimeSlicing","interval":10},"zeta":1,"alpha":[1.5,"x",null]})");

  const AllocationResult& allocation = *claim.status.allocation;
  ASSERT_EQ(allocation.devices.results.size(), 3u);
  EXPECT_EQ(allocation.devices.results[1].request, "nic/fast");
  EXPECT_THAT(allocation.devices.results[0].share_id,
              Optional(std::string("7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d")));
  EXPECT_EQ(allocation.devices.results[0].consumed_capacity.at("memory").str(), "0");
  EXPECT_EQ(allocation.devices.config[0].source, "FromClass");
  EXPECT_THAT(allocation.allocation_timestamp, Optional(std::string("2026-12-02T16:05:00Z")));
  EXPECT_EQ(allocation.node_selector->node_selector_terms[0].match_fields[0].values[0], "node-1");
  ASSERT_EQ(claim.status.reserved_for.size(), 1u);
  EXPECT_EQ(claim.status.reserved_for[0].resource, "pods");
  ASSERT_EQ(claim.status.devices.size(), 2u);
  EXPECT_EQ(claim.status.devices[0].conditions[0].reason, "Prepared");
  EXPECT_EQ(claim.status.devices[0].data.json, R"({"uuid":"GPU-1234"})");
  EXPECT_THAT(claim.status.devices[1].network_data->ips,
              ElementsAre("10.9.8.7/24", "2001:db8::1/64"));
}

TEST(DecodeTest, ResourceClaimV1beta1ConvertsToV1) {
  EXPECT_EQ(DecodeFile<ResourceClaim>("claim_v1beta1.yaml"),
            DecodeFile<ResourceClaim>("claim_v1.yaml"));
}

TEST(DecodeTest, ResourceClaimV1beta2IsV1) {
  std::string text = ReadTestData("claim_v1.yaml");
  const std::string from = "resource.k8s.io/v1\n";
  text.replace(text.find(from), from.size(), "resource.k8s.io/v1beta2\n");
  ASSERT_OK_AND_ASSIGN(ResourceClaim claim, DecodeOne<ResourceClaim>(text));
  EXPECT_EQ(claim, DecodeFile<ResourceClaim>("claim_v1.yaml"));
}

TEST(DecodeTest, MultiDocumentYamlWithLists) {
  ASSERT_OK_AND_ASSIGN(std::vector<Object> objects, Decode(ReadTestData("cluster.yaml")));
  std::vector<std::string> described;
  for (const Object& object : objects)
    described.push_back(Describe(object));
  EXPECT_THAT(described, ElementsAre("DeviceClass \"gpu.example.com\"", "Node \"node-1\"",
                                     "Pod \"ml/trainer-0\"", "DeviceTaintRule \"drain-gpu-0\"",
                                     "ResourceClaimTemplate \"ml/scratch-gpu\"",
                                     "DeviceTaintRule \"all-gpus-maintenance\""));

  const auto& cls = std::get<DeviceClass>(objects[0]);
  EXPECT_THAT(cls.spec.extended_resource_name, Optional(std::string("example.com/gpu")));
  EXPECT_EQ(cls.spec.config[0].opaque->parameters.json, R"({"kind":"ClassDefaults"})");

  const auto& node = std::get<Node>(objects[1]);
  EXPECT_EQ(node.metadata.labels.at("topology.kubernetes.io/zone"), "a");
  EXPECT_EQ(node.extra.json,
            R"({"spec":{"podCIDR":"10.0.0.0/24"},"status":{"allocatable":{"cpu":"64"}}})");

  const auto& pod = std::get<Pod>(objects[2]);
  EXPECT_EQ(pod.spec.node_name, "node-1");
  ASSERT_EQ(pod.spec.resource_claims.size(), 2u);
  EXPECT_THAT(pod.spec.resource_claims[1].resource_claim_template_name,
              Optional(std::string("scratch-gpu")));
  ASSERT_EQ(pod.spec.containers.size(), 1u);
  const Container& main = pod.spec.containers[0];
  EXPECT_EQ(main.resources.requests.at("example.com/gpu").str(), "1");
  EXPECT_EQ(main.resources.requests.at("cpu").str(), "500m");
  EXPECT_EQ(main.resources.claims[0].request, "gpus");
  EXPECT_EQ(main.extra.json, R"({"command":["python","train.py"]})");
  EXPECT_EQ(pod.spec.extra.json, R"({"volumes":[{"name":"data","emptyDir":{}}]})");
  EXPECT_EQ(pod.status.phase, "Pending");
  EXPECT_THAT(pod.status.resource_claim_statuses[0].resource_claim_name,
              Optional(std::string("trainer-0-scratch-x7k2p")));
  EXPECT_EQ(pod.status.extended_resource_claim_status->request_mappings[0].request_name,
            "container-0-request-0");

  const auto& rule = std::get<DeviceTaintRule>(objects[3]);
  EXPECT_THAT(rule.spec.device_selector->device, Optional(std::string("gpu-0")));
  EXPECT_EQ(rule.spec.taint.effect, "NoExecute");

  const auto& tmpl = std::get<ResourceClaimTemplate>(objects[4]);
  EXPECT_EQ(tmpl.spec.metadata.labels.at("purpose"), "scratch");
  EXPECT_EQ(tmpl.spec.spec.devices.requests[0].exactly->count, 1);
}

TEST(DecodeTest, JsonTypedListItemsInheritKind) {
  ASSERT_OK_AND_ASSIGN(std::vector<Object> objects, Decode(ReadTestData("list.json")));
  ASSERT_EQ(objects.size(), 2u);
  const auto& a = std::get<ResourceClaim>(objects[0]);
  EXPECT_EQ(a.spec.devices.requests[0].exactly->allocation_mode, "ExactCount");
  EXPECT_EQ(a.spec.devices.requests[0].exactly->count, 1);
  const auto& b = std::get<ResourceClaim>(objects[1]);
  EXPECT_EQ(b.spec.devices.requests[0].exactly->count, 3);  // v1beta1 inline fields converted
}

TEST(DecodeTest, JsonArrayOfObjects) {
  ASSERT_OK_AND_ASSIGN(std::vector<Object> objects,
                       Decode(R"([{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}},
                 {"apiVersion":"v1","kind":"Node","metadata":{"name":"b"}}])"));
  EXPECT_EQ(objects.size(), 2u);
}

TEST(DecodeTest, DefaultsCanBeDisabled) {
  const std::string text = R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
      "metadata":{"name":"c"},"spec":{"devices":{"requests":[{"name":"r",
      "exactly":{"deviceClassName":"x"}}]}}})";
  ASSERT_OK_AND_ASSIGN(ResourceClaim claim,
                       DecodeOne<ResourceClaim>(text, {.apply_defaults = false}));
  EXPECT_EQ(claim.spec.devices.requests[0].exactly->allocation_mode, "");
  EXPECT_EQ(claim.spec.devices.requests[0].exactly->count, 0);
  Object object = claim;
  ApplyDefaults(object);
  EXPECT_EQ(std::get<ResourceClaim>(object).spec.devices.requests[0].exactly->count, 1);
}

TEST(DecodeTest, YamlScalarsFollowTheCoreSchema) {
  const std::string text = R"(
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: d.example.com
  pool: {name: p, generation: 0x10, resourceSliceCount: 1}
  allNodes: true
  devices:
  - name: dev
    attributes:
      a: {string: "123"}
      b: {int: -42}
      c: {string: 'true'}
      d: {bool: True}
)";
  ASSERT_OK_AND_ASSIGN(ResourceSlice slice, DecodeOne<ResourceSlice>(text));
  EXPECT_EQ(slice.spec.pool.generation, 16);
  const auto& attrs = slice.spec.devices[0].attributes;
  EXPECT_THAT(attrs.at("a").string_value, Optional(std::string("123")));
  EXPECT_THAT(attrs.at("b").int_value, Optional(-42));
  EXPECT_THAT(attrs.at("c").string_value, Optional(std::string("true")));
  EXPECT_THAT(attrs.at("d").bool_value, Optional(true));
}

TEST(DecodeTest, YamlScalarsIntoStringFieldsLikeKubectl) {
  ASSERT_OK_AND_ASSIGN(Node node, DecodeOne<Node>(R"(
apiVersion: v1
kind: Node
metadata:
  name: 42
  labels: {version: 1.0, enabled: true, big: 1.5, count: 7}
)"));
  EXPECT_EQ(node.metadata.name, "42");
  EXPECT_EQ(node.metadata.labels.at("version"), "1");
  EXPECT_EQ(node.metadata.labels.at("enabled"), "true");
  EXPECT_EQ(node.metadata.labels.at("big"), "1.5");
  EXPECT_EQ(node.metadata.labels.at("count"), "7");
  // YAML 1.1 booleans and hex, exactly as kubectl (sigs.k8s.io/yaml) reads them.
  ASSERT_OK_AND_ASSIGN(
      node, DecodeOne<Node>("apiVersion: v1\nkind: Node\n"
                            "metadata: {name: n, labels: {a: y, b: on, c: 0x10, y: 'no'}}\n"));
  EXPECT_EQ(node.metadata.name, "false");
  EXPECT_EQ(node.metadata.labels, (std::map<std::string, std::string>{
                                      {"a", "true"}, {"b", "true"}, {"c", "16"}, {"true", "no"}}));
}

TEST(DecodeTest, YamlAnchorsAliasesAndMergeKeys) {
  const std::string text = R"(
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: d.example.com
  pool: {name: p, resourceSliceCount: 1}
  allNodes: true
  devices:
  - name: gpu-0
    attributes: &common
      model: {string: H200}
      numaNode: {int: 0}
  - name: gpu-1
    attributes:
      <<: *common
      numaNode: {int: 1}
  - name: gpu-2
    attributes: *common
)";
  ASSERT_OK_AND_ASSIGN(ResourceSlice slice, DecodeOne<ResourceSlice>(text));
  ASSERT_EQ(slice.spec.devices.size(), 3u);
  EXPECT_THAT(slice.spec.devices[1].attributes.at("model").string_value,
              Optional(std::string("H200")));
  EXPECT_THAT(slice.spec.devices[1].attributes.at("numaNode").int_value, Optional(1));
  EXPECT_EQ(slice.spec.devices[2].attributes, slice.spec.devices[0].attributes);
  EXPECT_THAT(Decode("a: {<<: 1}\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("merge key")));
}

TEST(EncodeTest, GoldenClaim) {
  const ResourceClaim claim = DecodeFile<ResourceClaim>("claim_v1.yaml");
  std::string golden = ReadTestData("claim_v1.golden.json");
  while (!golden.empty() && golden.back() == '\n')
    golden.pop_back();
  EXPECT_EQ(EncodeJson(claim, {.indent = 2}), golden);
}

TEST(EncodeTest, OmitsEmptyFieldsLikeGo) {
  ResourceClaim claim;
  claim.metadata.name = "c";
  DeviceRequest request;
  request.name = "r";
  request.exactly.emplace();
  request.exactly->device_class_name = "gpu";
  claim.spec.devices.requests.push_back(request);
  EXPECT_EQ(EncodeJson(claim),
            R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c"},)"
            R"("spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu"}}]}},)"
            R"("status":{}})");
  ResourceSlice slice;
  slice.spec.driver = "d";
  Device device;
  device.name = "x";
  device.capacity["mem"].value = Quantity::Parse("1Gi").value();
  slice.spec.devices.push_back(device);
  EXPECT_EQ(EncodeJson(slice),
            R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{},)"
            R"("spec":{"driver":"d","pool":{"name":"","generation":0,"resourceSliceCount":0},)"
            R"("devices":[{"name":"x","capacity":{"mem":{"value":"1Gi"}}}]}})");
}

TEST(EncodeTest, RoundTripsEveryTestFile) {
  for (const char* file : {"slice_v1.yaml", "slice_v1beta1.yaml", "claim_v1.yaml",
                           "claim_v1beta1.yaml", "cluster.yaml", "list.json"}) {
    SCOPED_TRACE(file);
    ASSERT_OK_AND_ASSIGN(std::vector<Object> objects, Decode(ReadTestData(file)));
    const std::string json = EncodeJsonList(objects);
    ASSERT_OK_AND_ASSIGN(std::vector<Object> again, Decode(json, {.apply_defaults = false}));
    EXPECT_EQ(again, objects);
    EXPECT_EQ(EncodeJsonList(again), json);
    // Per-type overloads and the Object overload agree.
    for (const Object& object : objects) {
      EXPECT_EQ(std::visit([](const auto& o) { return EncodeJson(o); }, object),
                EncodeJson(object));
    }
  }
}

TEST(EncodeTest, KeptFieldsComeBack) {
  ASSERT_OK_AND_ASSIGN(std::vector<Object> objects, Decode(ReadTestData("cluster.yaml")));
  const std::string pod = EncodeJson(objects[2]);
  EXPECT_THAT(pod, HasSubstr(R"("volumes":[{"name":"data","emptyDir":{}}])"));
  EXPECT_THAT(pod, HasSubstr(R"("command":["python","train.py"])"));
  EXPECT_THAT(pod, HasSubstr(R"("conditions":[{"type":"PodScheduled","status":"False"}])"));
  const std::string node = EncodeJson(objects[1]);
  EXPECT_THAT(node, HasSubstr(R"("status":{"allocatable":{"cpu":"64"}})"));
}

// ---- Errors -------------------------------------------------------------------------------------

absl::Status DecodeError(const std::string& text, DecodeOptions options = {}) {
  return Decode(text, options).status();
}

TEST(DecodeErrorTest, WrongTypeNamesObjectAndField) {
  EXPECT_THAT(
      DecodeError(R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, namespace: ml}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: c, count: two}
)",
                  {.source = "claims.yaml"}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "claims.yaml: ResourceClaim \"ml/gpu\": "
               "spec.devices.requests[0].exactly.count: expected an integer, got a string"));
}

TEST(DecodeErrorTest, V1beta1ErrorsUseV1Paths) {
  EXPECT_THAT(DecodeError(R"({"apiVersion":"resource.k8s.io/v1beta1","kind":"ResourceClaim",
      "metadata":{"name":"c"},"spec":{"devices":{"requests":[{"name":"r","count":"x"}]}}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("spec.devices.requests[0].exactly.count: expected an integer")));
}

TEST(DecodeErrorTest, DocumentNumberInMultiDocumentYaml) {
  EXPECT_THAT(DecodeError("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\n"
                          "apiVersion: v1\nkind: Node\nmetadata: {name: [b]}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "document 2: Node \"\": metadata.name: expected a string, got a list"));
}

TEST(DecodeErrorTest, BadValues) {
  EXPECT_THAT(DecodeError(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
      "metadata":{"name":"s"},"spec":{"devices":[{"name":"d","capacity":{"mem":{"value":"8 GB"}}}]}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("spec.devices[0].capacity[mem].value: quantity \"8 GB\" must "
                                 "match the regular expression")));
  EXPECT_THAT(DecodeError(R"({"apiVersion":"v1","kind":"Node","metadata":{"generation":1e30}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("metadata.generation: expected an integer that fits in 64 bits")));
  EXPECT_THAT(
      DecodeError(
          R"({"apiVersion":"v1","kind":"Node","metadata":{"generation":18446744073709551615}})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("integer 18446744073709551615 does not fit in 64 bits")));
  EXPECT_THAT(
      DecodeError("apiVersion: v1\nkind: Node\nmetadata: {generation: 99999999999999999999999}\n"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("metadata.generation")));
  EXPECT_THAT(DecodeError(R"({"apiVersion":"v1","kind":"Node","metadata":{"labels":{"a":1}}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("metadata.labels[a]: expected a string, got an integer")));
}

TEST(DecodeErrorTest, UnknownKindsAndVersions) {
  EXPECT_THAT(
      DecodeError("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("unsupported object kind \"Deployment\" (apiVersion \"apps/v1\")")));
  EXPECT_THAT(Decode("apiVersion: apps/v1\nkind: Deployment\n", {.skip_unknown_kinds = true}),
              IsOkAndHolds(::testing::IsEmpty()));
  EXPECT_THAT(DecodeError("apiVersion: resource.k8s.io/v1beta1\nkind: DeviceTaintRule\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("v1beta1 has no")));
  EXPECT_THAT(DecodeError("kind: Node\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("object has no apiVersion")));
  EXPECT_THAT(DecodeError("apiVersion: v1\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("object has no kind")));
  EXPECT_THAT(DecodeError("42\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected a Kubernetes object, got an integer")));
}

TEST(DecodeErrorTest, ApiVersionAndKindMustBeStrings) {
  EXPECT_THAT(DecodeError("apiVersion: 1\nkind: Node\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "apiVersion: expected a string, got an integer"));
  EXPECT_THAT(DecodeError(R"({"apiVersion":"v1","kind":["Node"]})", {.source = "n.json"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "n.json: kind: expected a string, got a list"));
  // Null is absent: a typed list's items take the list's apiVersion and kind.
  ASSERT_OK_AND_ASSIGN(std::vector<Object> objects,
                       Decode(R"({"apiVersion":"v1","kind":"NodeList","items":[
                           {"apiVersion":null,"kind":null,"metadata":{"name":"a"}}]})"));
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(std::get<Node>(objects[0]).metadata.name, "a");
}

TEST(DecodeErrorTest, ListElementErrorsNameTheIndex) {
  EXPECT_THAT(DecodeError(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
      "metadata":{"name":"s"},"spec":{"devices":[{"name":"d",
      "attributes":{"flags":{"bools":[true,"no"]}}}]}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("spec.devices[0].attributes[flags].bools[1]: expected a boolean, "
                                 "got a string")));
  EXPECT_THAT(DecodeError(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
      "metadata":{"name":"s"},"spec":{"devices":[{"name":"d",
      "attributes":{"flags":{"bools":true}}}]}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attributes[flags].bools: expected a list, got a boolean")));
}

TEST(DecodeErrorTest, StrictRejectsUnknownFields) {
  const std::string text = R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClasName: gpu}
)";
  EXPECT_THAT(Decode(text), IsOk());
  EXPECT_THAT(
      DecodeError(text, {.strict = true}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("unknown field \"spec.devices.requests[0].exactly.deviceClasName\"")));
}

TEST(DecodeErrorTest, SyntaxErrors) {
  EXPECT_THAT(DecodeError("{\"apiVersion\": \"v1\",", {.source = "x.json"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("x.json: invalid JSON: ")));
  EXPECT_THAT(DecodeError("a: [1, 2\nb: c\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid YAML at line")));
  EXPECT_THAT(DecodeError("a: 1\na: 2\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate field \"a\"")));
  EXPECT_THAT(DecodeError("? [a]\n: 1\n"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    HasSubstr("mapping keys must be strings")));
  EXPECT_THAT(DecodeError("a: .nan\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot be represented")));
}

TEST(DecodeErrorTest, DecodeOneWantsOneObjectOfTheKind) {
  EXPECT_THAT(
      DecodeOne<ResourceClaim>("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"),
      StatusIs(absl::StatusCode::kInvalidArgument, "expected a ResourceClaim, got Node \"n1\""));
  EXPECT_THAT(DecodeOne<Node>(""),
              StatusIs(absl::StatusCode::kInvalidArgument, "expected exactly one object, got 0"));
}

}  // namespace
}  // namespace devlet::kube
