#include "cuda_check.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "error.h"
#include "node_shell.h"

namespace gpuprov {
namespace {

const std::string kImage = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04";
const std::string kNoEvents = R"({"kind":"EventList","items":[]})";

/// A pod as the API returns it, with \a status_json as its status.
std::string Pod(const std::string& status_json) {
  return R"({"kind":"Pod","metadata":{"name":"gpuprov-cuda-check","uid":"u1"},"status":)" +
         status_json + "}";
}

std::string Terminated(const std::string& phase, int code, const std::string& reason,
                       const std::string& message) {
  return Pod(R"({"phase":")" + phase + R"(","containerStatuses":[{"name":"cuda","state":)"
             R"({"terminated":{"exitCode":)" + std::to_string(code) + R"(,"reason":")" + reason +
             R"(","message":")" + message + R"("}}}]})");
}

std::string Waiting(const std::string& reason, const std::string& message) {
  return Pod(R"({"phase":"Pending","containerStatuses":[{"name":"cuda","state":{"waiting":)"
             R"({"reason":")" + reason + R"(","message":")" + message + R"("}}}]})");
}

const char* const kOciPrefix =
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
    "runc create failed: unable to start container process: error during container init: "
    "error running prestart hook #0: exit status 1, stdout: , stderr: ";

TEST(JudgeCudaCheck, SucceededPassesWithTheLogsLastLine) {
  CudaCheckVerdict v = JudgeCudaCheck(Terminated("Succeeded", 0, "Completed", ""), kNoEvents,
                                      "[Vector addition of 50000 elements]\nTest PASSED\nDone\n",
                                      "box", kImage);
  EXPECT_EQ(v.state, CudaCheckState::kPassed);
  EXPECT_EQ(v.detail, "Done");
}

struct CauseCase {
  std::string name;
  std::string pod;
  std::string events;
  std::string log;
  std::string cause;  // a part of the cause named
  std::string hint;   // a part of the hint
};

class JudgeCauses : public ::testing::TestWithParam<CauseCase> {};

TEST_P(JudgeCauses, EachFailureIsNamedWithWhatToDo) {
  const CauseCase& c = GetParam();
  CudaCheckVerdict v = JudgeCudaCheck(c.pod, c.events, c.log, "box", kImage);
  EXPECT_EQ(v.state, CudaCheckState::kFailed);
  EXPECT_NE(v.failure.cause.find(c.cause), std::string::npos) << v.failure.cause;
  EXPECT_NE(v.failure.hint.find(c.hint), std::string::npos) << v.failure.hint;
  EXPECT_FALSE(v.detail.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Causes, JudgeCauses,
    ::testing::Values(
        CauseCase{"DriverLibraryMismatch",
                  Terminated("Failed", 128, "StartError",
                             std::string(kOciPrefix) + "nvidia-container-cli: initialization "
                             "error: nvml error: driver/library version mismatch: unknown"),
                  kNoEvents, "", "NVIDIA driver/library version mismatch", "sudo reboot"},
        CauseCase{"FabricManager802", Terminated("Failed", 1, "Error", ""), kNoEvents,
                  "[Vector addition of 50000 elements]\nFailed to allocate device vector A "
                  "(error code system not yet initialized)!\n",
                  "CUDA error 802", "systemctl enable --now nvidia-fabricmanager"},
        CauseCase{"ImageTooNew",
                  Terminated("Failed", 128, "StartError",
                             std::string(kOciPrefix) + "nvidia-container-cli: requirement error: "
                             "unsatisfied condition: cuda>=12.5, please update your driver to a "
                             "newer version, or use an earlier cuda container: unknown"),
                  kNoEvents, "", "unsatisfied condition: cuda>=12.5)", "smoke_test_image"},
        CauseCase{"ErrImagePull",
                  Waiting("ErrImagePull",
                          "rpc error: code = NotFound desc = failed to pull and unpack image "
                          "\\\"nvcr.io/x:nope\\\": not found"),
                  kNoEvents, "", "could not pull the image", "crictl pull"},
        CauseCase{"ImagePullBackOff",
                  Waiting("ImagePullBackOff", "Back-off pulling image \\\"nvcr.io/x:nope\\\""),
                  kNoEvents, "", "could not pull the image", "crictl pull"},
        CauseCase{"RuntimeNotFound",
                  Pod(R"({"phase":"Pending","containerStatuses":[{"name":"cuda","state":)"
                      R"({"waiting":{"reason":"ContainerCreating"}}}]})"),
                  R"({"items":[{"involvedObject":{"uid":"u1"},"reason":"FailedCreatePodSandBox",)"
                  R"("type":"Warning","message":"Failed to create pod sandbox: rpc error: code = )"
                  R"(Unknown desc = failed to get sandbox runtime: no runtime for \"nvidia\" is )"
                  R"(configured"}]})",
                  "", "no runtime for \"nvidia\" is configured", "nvidia-container-runtime"}),
    [](const ::testing::TestParamInfo<CauseCase>& info) { return info.param.name; });

TEST(JudgeCudaCheck, AProgramThatFailsOtherwiseQuotesItsLog) {
  CudaCheckVerdict v = JudgeCudaCheck(Terminated("Failed", 1, "Error", ""), kNoEvents,
                                      "line 1\nsegfault in kernel\n", "box", kImage);
  EXPECT_EQ(v.state, CudaCheckState::kFailed);
  EXPECT_EQ(v.failure.cause, "");
  EXPECT_NE(v.detail.find("segfault in kernel"), std::string::npos) << v.detail;
}

TEST(JudgeCudaCheck, PendingPodsWaitAndSayOnWhat) {
  CudaCheckVerdict v = JudgeCudaCheck(
      Pod(R"({"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False",)"
          R"("reason":"Unschedulable","message":"0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}]})"),
      kNoEvents, "", "box", kImage);
  EXPECT_EQ(v.state, CudaCheckState::kRunning);
  EXPECT_NE(v.detail.find("Insufficient nvidia.com/gpu"), std::string::npos) << v.detail;
  // An older pod's sandbox event (another uid) does not fail this one.
  v = JudgeCudaCheck(Waiting("ContainerCreating", ""),
                     R"({"items":[{"involvedObject":{"uid":"old"},"reason":"FailedCreatePodSandBox",)"
                     R"("message":"no runtime for \"nvidia\" is configured"}]})",
                     "", "box", kImage);
  EXPECT_EQ(v.state, CudaCheckState::kRunning);
  EXPECT_EQ(JudgeCudaCheck("", "", "", "box", kImage).state, CudaCheckState::kRunning);
}

TEST(CudaCheckPodJson, RequestsTheGpusWithNoRuntimeClass) {
  const std::string pod = CudaCheckPodJson(kImage, 8);
  EXPECT_NE(pod.find(R"("nvidia.com/gpu":"8")"), std::string::npos) << pod;
  EXPECT_NE(pod.find(R"("restartPolicy":"Never")"), std::string::npos) << pod;
  EXPECT_NE(pod.find(R"("name":"gpuprov-cuda-check")"), std::string::npos) << pod;
  EXPECT_NE(pod.find(kImage), std::string::npos) << pod;
  EXPECT_EQ(pod.find("runtimeClassName"), std::string::npos) << pod;
}

/// Answers create, polls (from a queue; the last repeats) and deletes.
class CheckNode : public NodeShell {
 public:
  SshRunResult RunAsRoot(const std::string& purpose, const std::string& command,
                         const std::string& stdin_data, std::chrono::milliseconds) override {
    calls.push_back(purpose);
    if (purpose == "create CUDA check pod") {
      pod_sent = stdin_data;
      EXPECT_NE(command.find("DELETE"), std::string::npos);  // an earlier pod goes first
      return {0, "@@created@@\n{}\n@@code@@\n" + create_code + "\n", ""};
    }
    if (purpose == "CUDA check") {
      std::string out = polls.front();
      if (polls.size() > 1) polls.pop_front();
      return {0, out, ""};
    }
    return {0, "", ""};
  }
  std::string create_code = "201";
  std::deque<std::string> polls;
  std::vector<std::string> calls;
  std::string pod_sent;
};

std::string Poll(const std::string& pod, const std::string& log = "") {
  return "@@pod@@\n" + pod + "\n@@events@@\n" + kNoEvents + "\n@@log@@\n" + log + "\n@@end@@\n";
}

TEST(RunCudaCheck, CreatesWaitsAndDeletesThePod) {
  CheckNode node;
  node.polls = {Poll(Waiting("ContainerCreating", "")),
                Poll(Terminated("Succeeded", 0, "Completed", ""), "Test PASSED\nDone\n")};
  CudaCheckInputs in;
  in.vm_name = "box";
  in.gpus = 2;
  in.poll_interval = std::chrono::milliseconds(1);
  EXPECT_EQ(RunCudaCheck(node, in), "Done");
  EXPECT_EQ(node.calls, (std::vector<std::string>{"create CUDA check pod", "CUDA check",
                                                  "CUDA check", "delete CUDA check pod"}));
  EXPECT_NE(node.pod_sent.find(R"("nvidia.com/gpu":"2")"), std::string::npos);
}

TEST(RunCudaCheck, AFailureNamesTheCauseAndStillDeletesThePod) {
  CheckNode node;
  node.polls = {Poll(Terminated("Failed", 1, "Error", ""),
                     "Failed to allocate device vector A (error code system not yet initialized)!\n")};
  CudaCheckInputs in;
  in.vm_name = "box";
  try {
    RunCudaCheck(node, in);
    FAIL() << "a failed CUDA program passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the CUDA check failed on box: CUDA error 802"),
              std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("gpuprov down box"), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find("--no-smoke-test"), std::string::npos) << e.hint();
  }
  EXPECT_EQ(node.calls.back(), "delete CUDA check pod");
}

TEST(RunCudaCheck, APodThatNeverFinishesTimesOutSayingWhy) {
  CheckNode node;
  node.polls = {Poll(Waiting("ContainerCreating", ""))};
  CudaCheckInputs in;
  in.vm_name = "box";
  in.wait = std::chrono::seconds(0);
  try {
    RunCudaCheck(node, in);
    FAIL() << "a pod that never ran passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not finish within 0s (Pending, ContainerCreating)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(node.calls.back(), "delete CUDA check pod");
}

TEST(RunCudaCheck, APodTheApiRefusesIsNamed) {
  CheckNode node;
  node.create_code = "403";
  CudaCheckInputs in;
  in.vm_name = "box";
  EXPECT_THROW(RunCudaCheck(node, in), Error);
  EXPECT_EQ(node.calls, std::vector<std::string>{"create CUDA check pod"});
}

/// A cluster's server answering the checks of several nodes: each pod's polls come from its
/// own queue (the last repeats), in the order the poll command names the pods.
class ClusterCheckNode : public NodeShell {
 public:
  SshRunResult RunAsRoot(const std::string& purpose, const std::string& command,
                         const std::string& stdin_data, std::chrono::milliseconds) override {
    calls.push_back(purpose);
    if (purpose == "create CUDA check pods") {
      bodies = stdin_data;
      std::string out;
      std::istringstream lines(stdin_data);
      std::string line;
      while (std::getline(lines, line)) {
        const bool refused = line.find(refused_pod) != std::string::npos && !refused_pod.empty();
        out += "@@created@@\n" +
               std::string(refused ? R"({"kind":"Status","message":"pods is forbidden"})" : "{}") +
               "\n@@code@@\n" + (refused ? "403" : "201") + "\n";
      }
      return {0, out, ""};
    }
    if (purpose == "CUDA check") {
      std::string out;
      const std::string lead = "echo '@@pod@@'\napi '";
      for (size_t at = command.find(lead); at != std::string::npos;
           at = command.find(lead, at + 1)) {
        const size_t from = command.find("/pods/", at) + 6;
        const std::string pod = command.substr(from, command.find('\'', from) - from);
        polled.push_back(pod);
        std::deque<std::string>& q = polls[pod];
        out += q.front();
        if (q.size() > 1) q.pop_front();
      }
      return {0, out, ""};
    }
    if (purpose == "delete CUDA check pods") deleted = command;
    return {0, "", ""};
  }
  std::map<std::string, std::deque<std::string>> polls;  // by pod name
  std::string refused_pod;
  std::vector<std::string> calls;
  std::vector<std::string> polled;
  std::string bodies;
  std::string deleted;
};

CudaCheckInputs NodeCheck(const std::string& vm, const std::string& node) {
  CudaCheckInputs in;
  in.vm_name = vm;
  in.node_name = node;
  in.api_vm = "train";
  in.gpus = 2;
  in.poll_interval = std::chrono::milliseconds(1);
  return in;
}

TEST(CudaCheckPodJson, ANodesPodIsBoundToItByName) {
  const std::string pod = CudaCheckPodJson(kImage, 1, "gpuprov-cuda-check-train-agent-1", "node-b");
  EXPECT_NE(pod.find(R"("nodeName":"node-b")"), std::string::npos) << pod;
  EXPECT_NE(pod.find(R"("name":"gpuprov-cuda-check-train-agent-1")"), std::string::npos) << pod;
  EXPECT_EQ(CudaCheckPodJson(kImage, 1).find("nodeName"), std::string::npos);
  EXPECT_EQ(CudaCheckPodName(NodeCheck("train-agent-1", "node-b")),
            "gpuprov-cuda-check-train-agent-1");
  CudaCheckInputs single;
  single.vm_name = "box";
  EXPECT_EQ(CudaCheckPodName(single), kCudaCheckPod);
}

TEST(RunCudaChecks, OnePodPerNodeRunAtOnceEachNodeJudgedOnItsOwn) {
  ClusterCheckNode server;
  const std::string passed =
      Poll(Terminated("Succeeded", 0, "Completed", ""), "Test PASSED\nDone\n");
  server.polls["gpuprov-cuda-check-train"] = {Poll(Waiting("ContainerCreating", "")), passed};
  server.polls["gpuprov-cuda-check-train-agent-1"] = {passed};
  server.polls["gpuprov-cuda-check-train-agent-2"] = {
      Poll(Waiting("ContainerCreating", "")),
      Poll(Terminated("Failed", 1, "Error", ""),
           "Failed to allocate device vector A (error code system not yet initialized)!\n")};
  const std::vector<CudaCheckOutcome> out =
      RunCudaChecks(server, {NodeCheck("train", "node-a"), NodeCheck("train-agent-1", "node-b"),
                             NodeCheck("train-agent-2", "node-c")});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].passed);
  EXPECT_EQ(out[0].last_line, "Done");
  EXPECT_TRUE(out[1].passed);
  EXPECT_FALSE(out[2].passed);
  EXPECT_EQ(out[2].vm_name, "train-agent-2");
  EXPECT_NE(out[2].error.find("the CUDA check failed on train-agent-2: CUDA error 802"),
            std::string::npos)
      << out[2].error;
  // The node's own commands name the node; the API's, the server.
  EXPECT_NE(out[2].hint.find("gpuprov ssh train-agent-2 -- sudo systemctl enable --now "
                             "nvidia-fabricmanager"),
            std::string::npos)
      << out[2].hint;
  EXPECT_NE(out[2].hint.find("gpuprov ssh train -- sudo k3s kubectl"), std::string::npos)
      << out[2].hint;
  // One create for all, polls of only the pods still running, one delete for all.
  EXPECT_EQ(server.calls, (std::vector<std::string>{"create CUDA check pods", "CUDA check",
                                                    "CUDA check", "delete CUDA check pods"}));
  EXPECT_EQ(server.polled,
            (std::vector<std::string>{"gpuprov-cuda-check-train", "gpuprov-cuda-check-train-agent-1",
                                      "gpuprov-cuda-check-train-agent-2", "gpuprov-cuda-check-train",
                                      "gpuprov-cuda-check-train-agent-2"}));
  // Each pod bound to its node, with the GPUs asked.
  EXPECT_NE(server.bodies.find(R"("nodeName":"node-b")"), std::string::npos) << server.bodies;
  EXPECT_NE(server.bodies.find(R"("nodeName":"node-c")"), std::string::npos) << server.bodies;
  EXPECT_NE(server.bodies.find(R"("nvidia.com/gpu":"2")"), std::string::npos) << server.bodies;
  for (const char* pod : {"gpuprov-cuda-check-train'", "gpuprov-cuda-check-train-agent-1'",
                          "gpuprov-cuda-check-train-agent-2'"}) {
    EXPECT_NE(server.deleted.find(pod), std::string::npos) << pod;
  }
}

TEST(RunCudaChecks, APodTheApiRefusesFailsItsNodeOnly) {
  ClusterCheckNode server;
  server.refused_pod = "gpuprov-cuda-check-train-agent-1";
  server.polls["gpuprov-cuda-check-train"] = {
      Poll(Terminated("Succeeded", 0, "Completed", ""), "Done\n")};
  const std::vector<CudaCheckOutcome> out = RunCudaChecks(
      server, {NodeCheck("train", "node-a"), NodeCheck("train-agent-1", "node-b")});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].passed);
  EXPECT_FALSE(out[1].passed);
  EXPECT_NE(out[1].error.find("could not be created on train-agent-1 (HTTP 403): pods is "
                              "forbidden"),
            std::string::npos)
      << out[1].error;
  EXPECT_EQ(server.polled, std::vector<std::string>{"gpuprov-cuda-check-train"});
}

TEST(RunCudaChecks, ANodeThatNeverFinishesTimesOutWhileTheOthersAreJudged) {
  ClusterCheckNode server;
  server.polls["gpuprov-cuda-check-train"] = {
      Poll(Terminated("Succeeded", 0, "Completed", ""), "Done\n")};
  server.polls["gpuprov-cuda-check-train-agent-1"] = {Poll(Waiting("ContainerCreating", ""))};
  CudaCheckInputs slow = NodeCheck("train-agent-1", "node-b");
  slow.wait = std::chrono::seconds(0);
  const std::vector<CudaCheckOutcome> out =
      RunCudaChecks(server, {NodeCheck("train", "node-a"), slow});
  EXPECT_TRUE(out[0].passed);
  EXPECT_NE(out[1].error.find("the CUDA check on train-agent-1 did not finish within 0s"),
            std::string::npos)
      << out[1].error;
}

}  // namespace
}  // namespace gpuprov
