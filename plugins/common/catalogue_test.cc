// SPDX-License-Identifier: Apache-2.0
#include "catalogue.h"

#include <gtest/gtest.h>

#include "gpuprov/sdk.hpp"

namespace gpuprov::drivers {
namespace {

Catalogue Example() {
  Catalogue c;
  c.cloud = "ExampleCloud";
  c.rows = {{"l4-small", "L4", 1, true},  {"l4-big", "L4", 1, false}, {"l4-quad", "L4", 4, true},
            {"h100-one", "H100", 1, true}, {"cpu-large", "", 0, false}};
  c.cpu_default = {"cpu-small", "", 0, false};
  c.canonical_gpu = [](const std::string& g) -> std::optional<std::string> {
    std::string u;
    for (char ch : g) u += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (u == "H100-80GB") return std::string("H100");
    return u;
  };
  c.gpu_hint = [](const std::string& g) { return g == "A10" ? "its A10 is called A10G" : ""; };
  return c;
}

std::string InvalidInput(const std::function<void()>& f) {
  try {
    f();
  } catch (const gpuprov::sdk::DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    return e.what();
  }
  ADD_FAILURE() << "no DriverError";
  return "";
}

TEST(Catalogue, GpuRequestPicksThePreferredRowAndAliases) {
  const Catalogue c = Example();
  CatalogueChoice ch = ChooseInstanceType(c, GpuRequest{"l4", 1}, "");
  EXPECT_EQ(ch.row.instance_type, "l4-small");
  EXPECT_EQ(ch.index, std::optional<size_t>(0));
  EXPECT_EQ(ChooseInstanceType(c, GpuRequest{"H100-80GB", 1}, "").row.instance_type, "h100-one");
  EXPECT_EQ(GpusOf(ch.row), "L4:1");
}

TEST(Catalogue, InstanceTypeWithTheSameGpusIsTaken) {
  const Catalogue c = Example();
  EXPECT_EQ(ChooseInstanceType(c, GpuRequest{"L4", 1}, "l4-big").row.instance_type, "l4-big");
  EXPECT_EQ(InvalidInput([&] { ChooseInstanceType(c, GpuRequest{"L4", 1}, "h100-one"); }),
            "instance type h100-one does not have L4:1 (that is l4-small)");
}

TEST(Catalogue, WithoutGpu) {
  const Catalogue c = Example();
  CatalogueChoice cpu = ChooseInstanceType(c, std::nullopt, "");
  EXPECT_TRUE(cpu.cpu_default);
  EXPECT_EQ(cpu.row.instance_type, "cpu-small");
  EXPECT_EQ(ChooseInstanceType(c, std::nullopt, "cpu-large").index, std::optional<size_t>(4));
  CatalogueChoice unknown = ChooseInstanceType(c, std::nullopt, "brand-new-type");
  EXPECT_EQ(unknown.row.instance_type, "brand-new-type");
  EXPECT_FALSE(unknown.index.has_value());
  EXPECT_FALSE(unknown.cpu_default);
}

TEST(Catalogue, OneMessageListingWhatIsOffered) {
  const Catalogue c = Example();
  EXPECT_EQ(InvalidInput([&] { ChooseInstanceType(c, GpuRequest{"L4", 2}, ""); }),
            "ExampleCloud does not offer L4:2; it offers L4 as L4:1 (l4-small), L4:4 (l4-quad)");
  EXPECT_EQ(NotOfferedMessage(c, "A10", 1),
            "ExampleCloud does not offer A10:1 (its A10 is called A10G); GPUs it offers: L4 x1/x4, "
            "H100 x1");
}

}  // namespace
}  // namespace gpuprov::drivers
