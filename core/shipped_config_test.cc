// The files shipped in config/ must load with the same parsers users hit.
#include <gtest/gtest.h>

#include "config.h"
#include "spec.h"

namespace {

TEST(ShippedConfig, DefaultConfigTomlLoads) {
  gpuprov::Config c = gpuprov::LoadConfig(GPUPROV_SOURCE_DIR "/config/config.toml");
  EXPECT_TRUE(c.loaded);
  EXPECT_FALSE(c.defaults.kubernetes.has_value());
}

TEST(ShippedConfig, ExampleSpecsLoad) {
  gpuprov::Spec gcp = gpuprov::LoadSpec(GPUPROV_SOURCE_DIR "/config/example-spec.yaml");
  ASSERT_TRUE(gcp.gpus.has_value());
  EXPECT_EQ(gcp.gpus->type, "L4");
  EXPECT_EQ(gcp.kubernetes, true);
  gpuprov::Spec docker = gpuprov::LoadSpec(GPUPROV_SOURCE_DIR "/config/docker-spec.yaml");
  EXPECT_EQ(docker.cloud, "docker");
  EXPECT_EQ(docker.kubernetes, false);
}

}  // namespace
