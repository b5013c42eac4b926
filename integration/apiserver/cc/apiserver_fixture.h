// The set-up the tests against apiserver-runner's kube-apiserver share: the connection from the
// kubeconfig the runner passes, decoding test objects, and creating claims allocated as the
// scheduler leaves them.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "devlet/common/testing/status_matchers.h"
#include "devlet/kube/client.h"
#include "devlet/kube/codec.h"
#include "devlet/kube/kubeconfig.h"
#include "devlet/kube/rest_client.h"

namespace devlet::apiserver_testing {

// ApiServerFixture connects store_ to the API server in DEVLET_TEST_KUBECONFIG (bearer token) and
// skips the test when it runs without apiserver-runner. A fixture that adds to SetUp calls this
// one first and returns when IsSkipped() or HasFatalFailure().
class ApiServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("DEVLET_TEST_KUBECONFIG");
    if (path == nullptr) GTEST_SKIP() << "run through apiserver-runner";
    ASSERT_OK_AND_ASSIGN(kube::RestConfig config, kube::LoadKubeconfig(path));
    // The default client-side rate limit would throttle tests that write in quick succession.
    config.qps = 50;
    config.burst = 100;
    ASSERT_OK_AND_ASSIGN(store_, kube::ApiServerStore::Create(config));
  }

  // Decode returns the one object of type T in `yaml`, or T{} after a test failure.
  template <typename T>
  static T Decode(const std::string& yaml) {
    absl::StatusOr<T> object = kube::DecodeOne<T>(yaml);
    EXPECT_TRUE(object.ok()) << object.status();
    return object.ok() ? *std::move(object) : T{};
  }

  // CreateAllocated creates `claim` (its metadata.uid and status are not sent) and then writes its
  // status.allocation through the status subresource, as the scheduler does. Returns the claim as
  // the API server has it after that (after a test failure, what it has).
  kube::ResourceClaim CreateAllocated(kube::ResourceClaim claim) {
    std::optional<kube::AllocationResult> allocation = std::move(claim.status.allocation);
    claim.metadata.uid.clear();
    claim.status = {};
    absl::StatusOr<kube::Object> created = store_->Create(claim);
    EXPECT_THAT(created.status(), ::devlet::testing::IsOk());
    if (!created.ok()) return claim;
    kube::ResourceClaim out = std::get<kube::ResourceClaim>(*created);
    out.status.allocation = std::move(allocation);
    absl::StatusOr<kube::Object> allocated = store_->UpdateStatus(out);
    EXPECT_THAT(allocated.status(), ::devlet::testing::IsOk());
    return allocated.ok() ? std::get<kube::ResourceClaim>(*allocated) : out;
  }

  // ReadClaim returns ResourceClaim default/`name` (an empty claim after a test failure).
  kube::ResourceClaim ReadClaim(const std::string& name) {
    absl::StatusOr<kube::ResourceClaim> claim =
        kube::GetAs<kube::ResourceClaim>(*store_, "default", name);
    EXPECT_THAT(claim.status(), ::devlet::testing::IsOk());
    return claim.ok() ? *claim : kube::ResourceClaim{};
  }

  std::unique_ptr<kube::ApiServerStore> store_;
};

}  // namespace devlet::apiserver_testing
