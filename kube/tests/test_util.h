// Helpers for kube tests: reading files from tests/testdata.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace devlet::kube::testing {

// ReadTestData returns the contents of kube/tests/testdata/<name> (tests run in kube/).
inline std::string ReadTestData(const std::string& name) {
  const std::string path = "tests/testdata/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace devlet::kube::testing
