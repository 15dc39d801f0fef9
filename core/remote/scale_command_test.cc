#include "scale_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprov {
namespace {

using ::testing::ElementsAre;

TEST(PodsToEvictTest, EveryPodButDaemonSetAndMirrorPods) {
  const std::string pods = R"({"kind":"PodList","items":[
    {"metadata":{"name":"web-1","namespace":"default","ownerReferences":[{"kind":"ReplicaSet"}]}},
    {"metadata":{"name":"nvidia-device-plugin-x","namespace":"kube-system",
                 "ownerReferences":[{"kind":"DaemonSet"}]}},
    {"metadata":{"name":"static","namespace":"kube-system",
                 "annotations":{"kubernetes.io/config.mirror":"abc"}}},
    {"metadata":{"name":"lonely"}}]})";
  EXPECT_THAT(PodsToEvict(pods), ElementsAre("default/web-1", "default/lonely"));
  EXPECT_TRUE(PodsToEvict("not json").empty());
}

}  // namespace
}  // namespace gpuprov
