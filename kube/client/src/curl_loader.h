// The REST client's libcurl is loaded on first use (curl_loader.cc); this says why it could not be.
#pragma once

#include <string>

namespace devlet::kube::internal {

// CurlLoadError is empty once libcurl is loaded; else why loading it failed. Loads it if no curl
// function ran yet.
std::string CurlLoadError();

}  // namespace devlet::kube::internal
