// File: devlet/dra_kubelet/plugin.h
//
// KubeletPlugin serves the kubelet's gRPC protocols over two Unix sockets, as the upstream Go
// helper (k8s.io/dynamic-resource-allocation/kubeletplugin) does:
//
//   <plugin data dir>/dra.sock            k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin,
//                                         k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin,
//                                         v1.DRAResourceHealth, v1alpha1.DRAResourceHealth
//   <registrar dir>/<driver>-reg.sock     pluginregistration.Registration
//
// The DRA socket listens before the registration socket appears (the kubelet dials the endpoint as
// soon as it registers us). GetInfo is answered from memory. With a pod UID (rolling update) the
// sockets are dra-<uid>.sock and <driver>-<uid>-reg.sock (hashed when too long for AF_UNIX).
// Stop removes the registration socket first, then the DRA socket.
//
// Handlers use gRPC's callback API and never block a gRPC thread: prepare and unprepare run on a
// small worker pool, health streams are fed by a broadcaster thread.
//
//   absl::StatusOr<std::unique_ptr<KubeletPlugin>> plugin =
//       KubeletPlugin::Start(options, preparer, &health_source);
//   ...
//   (*plugin)->Stop();
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devlet/dra_kubelet/interfaces.h"
#include "devlet/dra_kubelet/preparer.h"

namespace devlet::dra_kubelet {

inline constexpr std::string_view kDefaultRegistrarDir = "/var/lib/kubelet/plugins_registry";
inline constexpr std::string_view kDefaultPluginsDir = "/var/lib/kubelet/plugins";

// Advertisement tokens for PluginInfo.supported_versions (not all of them are gRPC service names).
inline constexpr std::string_view kDraV1Service = "v1.DRAPlugin";
inline constexpr std::string_view kDraV1beta1Service = "v1beta1.DRAPlugin";
inline constexpr std::string_view kHealthV1Service = "v1.DRAResourceHealth";
inline constexpr std::string_view kHealthV1alpha1Service = "v1alpha1.DRAResourceHealth";
// PluginInfo.type of a DRA driver.
inline constexpr std::string_view kDraPluginType = "DRAPlugin";

// kMaxHealthResendInterval bounds PluginOptions::health_resend_interval: the kubelet marks a
// device's health Unknown when no update came within its health check timeout (30 s by default).
inline constexpr std::chrono::seconds kMaxHealthResendInterval{30};

// PluginOptions configures the sockets and services.
struct PluginOptions {
  std::string driver_name;
  std::string registrar_dir = std::string(kDefaultRegistrarDir);
  // Default: <kDefaultPluginsDir>/<driver_name>.
  std::string plugin_data_dir;
  // POD_UID: rolling-update socket names.
  std::string pod_uid;
  bool serve_v1 = true;
  bool serve_v1beta1 = true;
  // Serve and advertise the health services; when off they answer Unimplemented.
  bool health = true;
  // Health snapshots are re-sent at least this often, changes at once. More than 0 and at most
  // kMaxHealthResendInterval (Start refuses other values).
  std::chrono::milliseconds health_resend_interval{20000};
  // Threads that run prepare and unprepare.
  int worker_threads = 2;
};

// RegistrationState is what the kubelet last told us through NotifyRegistrationStatus.
struct RegistrationState {
  bool notified = false;
  bool registered = false;
  std::string error;
};

// RegistrarSocketFileName returns the registration socket base name: "<driver>-reg.sock", or with
// a pod UID the first of "<driver>-<uid>-reg.sock", "<driver>-<b64url(sha256(uid))[:8 bytes]>-reg.sock",
// "dra-<b64url(sha256(driver NUL uid))[:16 bytes]>-reg.sock" whose full path fits. The upstream
// Go helper allows 108 bytes; gRPC's C core binds at most 107, so at exactly 108 bytes we take the
// next name (the kubelet registers any socket name).
std::string RegistrarSocketFileName(const std::string& registrar_dir, const std::string& driver,
                                    const std::string& pod_uid);

// DraSocketFileName returns "dra.sock", or "dra-<uid>.sock" with a pod UID.
std::string DraSocketFileName(const std::string& pod_uid);

// ValidateDriverName checks that `name` is a lower-case DNS subdomain of at most 63 characters.
absl::Status ValidateDriverName(const std::string& name);

// KubeletPlugin owns the two gRPC servers.
class KubeletPlugin {
 public:
  // Start creates the data directory (0750), starts the DRA server, then the registration server.
  // `preparer` must outlive the plugin; `health` may be null (health answers Unimplemented).
  static absl::StatusOr<std::unique_ptr<KubeletPlugin>> Start(const PluginOptions& options,
                                                              ClaimPreparer& preparer,
                                                              HealthSource* health);

  KubeletPlugin(const KubeletPlugin&) = delete;
  KubeletPlugin& operator=(const KubeletPlugin&) = delete;
  // Stops the plugin if Stop was not called.
  ~KubeletPlugin();

  // Stop removes the registration socket and stops its server, then the DRA server and socket,
  // then the workers. Idempotent.
  void Stop();

  // RegistrationStatus returns the kubelet's last NotifyRegistrationStatus.
  [[nodiscard]] RegistrationState RegistrationStatus() const;
  // SupportedVersions returns what GetInfo advertises, in order.
  [[nodiscard]] std::vector<std::string> SupportedVersions() const;
  [[nodiscard]] std::string RegistrarSocketPath() const;
  [[nodiscard]] std::string DraSocketPath() const;

  class Impl;

 private:
  explicit KubeletPlugin(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace devlet::dra_kubelet
