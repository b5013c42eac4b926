// File: devlet/dra_kubelet/devlet_adapters.h
//
// The plugin's interfaces (interfaces.h) implemented on devlet's own modules, as devlet-node wires
// them:
//
//   ResourceClaimFromKube / ManifestClaimSource   kube/ object model and codec (JSON or YAML)
//   CdiSpecWriter                                 cdi/ spec model, validation and atomic writer
//   StateClaimRecordStore                          state/ checkpoint (shared with the NRI plugin)
//
//   DEVLET_ASSIGN_OR_RETURN(auto checkpoint, StateClaimRecordStore::Open(data_dir, driver));
//   CdiSpecWriter cdi("/var/run/cdi");
//   ManifestClaimSource claims(manifests_dir);
//   ClaimPreparer preparer(options, claims, backend, cdi, *checkpoint);
#pragma once

#include <memory>
#include <string>

#include "devlet/dra_kubelet/interfaces.h"
#include "devlet/kube/resource.h"
#include "devlet/state/store.h"

namespace devlet::dra_kubelet {

// ResourceClaimFromKube converts a kube/ ResourceClaim into the plugin's narrow view.
ResourceClaim ResourceClaimFromKube(const kube::ResourceClaim& claim);

// ManifestClaimSource finds claims in the *.json / *.yaml / *.yml files of a directory (the
// standalone `--manifests DIR` layout), decoded with kube::Decode; files are re-read on each call.
class ManifestClaimSource final : public ClaimSource {
 public:
  explicit ManifestClaimSource(std::string dir);

  absl::StatusOr<ResourceClaim> GetClaim(const std::string& namespace_name,
                                         const std::string& name,
                                         const std::string& uid) override;

 private:
  std::string dir_;
};

// CdiSpecWriter writes specs with cdi::WriteSpec (validated, atomic) into `cdi_root`. By default
// without fsync: the specs are transient (the CDI root is normally a tmpfs), the rename keeps
// them atomic for the runtime and across our own crash, and the preparer rewrites a spec that a
// power loss left missing, empty or stale (SpecIsCurrent) from the checkpoint, which is synced.
class CdiSpecWriter final : public CdiWriter {
 public:
  explicit CdiSpecWriter(std::string cdi_root, bool sync = false);

  absl::Status WriteSpec(const std::string& file_name, const CdiSpec& spec) override;
  absl::Status RemoveSpec(const std::string& file_name) override;
  bool SpecExists(const std::string& file_name) override;
  // ListSpecs lists the ".json" files of the CDI root (a missing root is empty).
  absl::StatusOr<std::vector<std::string>> ListSpecs() override;
  // SpecIsCurrent compares the file with the spec's encoding (ignoring the version field).
  bool SpecIsCurrent(const std::string& file_name, const CdiSpec& spec) override;

 private:
  std::string root_;
  bool sync_;
};

// StateClaimRecordStore keeps ClaimRecords in the state/ checkpoint. Each record fills the generic
// PreparedClaim fields the NRI plugin reads (devices with driver, pool, requests, CDI IDs and
// attributes as strings; pod UIDs; files; applied config) and keeps the full record under the
// annotation kRecordAnnotation.
class StateClaimRecordStore final : public ClaimRecordStore {
 public:
  static constexpr char kRecordAnnotation[] = "dra-kubelet.devlet.io/record";

  // Open opens (creating) the checkpoint in `dir`. `driver` fills PreparedDevice.driver and
  // `cdi_root` turns CDI spec names into the paths recorded in PreparedClaim.files.
  static absl::StatusOr<std::unique_ptr<StateClaimRecordStore>> Open(const std::string& dir,
                                                                    std::string driver,
                                                                    std::string cdi_root);
  // Open with every state/ option (journal size, a file-system seam for crash injection).
  static absl::StatusOr<std::unique_ptr<StateClaimRecordStore>> Open(
      const state::StoreOptions& options, std::string driver, std::string cdi_root);

  absl::StatusOr<std::optional<ClaimRecord>> Get(const std::string& claim_uid) override;
  absl::Status Put(const ClaimRecord& record) override;
  absl::Status Delete(const std::string& claim_uid) override;
  absl::StatusOr<std::vector<ClaimRecord>> List() override;
  // Commit is one state/ Update: one checkpoint write for the whole batch.
  absl::Status Commit(const std::vector<ClaimRecord>& puts,
                      const std::vector<std::string>& deletes) override;
  // CommitDeferred is one state/ ApplyDeferred (written now, synced by the store's background
  // thread or before the next synced change); a batch with removals is synced as Commit.
  absl::Status CommitDeferred(const std::vector<ClaimRecord>& puts,
                              const std::vector<std::string>& deletes) override;

  // store is the underlying state/ store (e.g. for the NRI plugin in the same process).
  state::CheckpointStore& store() { return *store_; }

 private:
  StateClaimRecordStore(std::unique_ptr<state::CheckpointStore> store, std::string driver,
                       std::string cdi_root);

  std::unique_ptr<state::CheckpointStore> store_;
  std::string driver_;
  std::string cdi_root_;
};

}  // namespace devlet::dra_kubelet
