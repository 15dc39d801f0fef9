#include "completion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error.h"

namespace gpuprov {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

int Noop(const AppContext&, const ParsedArgs&) { return 0; }

const std::vector<OptionSpec> kGlobals = {
    {"verbose", 'v', nullptr, "logs"},
    {"output", 'o', "FORMAT", "format", Completion::kOutputFormat},
};

const std::vector<Command> kCommands = {
    {"provision",
     "provision",
     "make a VM",
     {{"cloud", 'c', "CLOUD", "cloud", Completion::kCloud},
      {"file", 'f', "SPEC", "spec", Completion::kFile},
      {"name", 'n', "NAME", "name"},
      {"gpus", 'g', "TYPE:COUNT", "gpus", Completion::kGpus}},
     &Noop,
     Completion::kNone,
     true},
    {"ssh", "ssh NAME", "shell", {}, &Noop, Completion::kVm},
    {"down",
     "down NAME",
     "delete",
     {{"yes", 'y', nullptr, "no question"}},
     &Noop,
     Completion::kVm,
     true},
    {"list", "list", "show", {}, &Noop},
    {"completion", "completion SHELL", "script", {}, &Noop, Completion::kShell},
    {"help", "help [COMMAND]", "help", {}, &Noop, Completion::kCommand},
    {"__complete", "__complete", "hidden", {}, &Noop, Completion::kNone, false, true},
};

class FakeSources : public CompletionSources {
 public:
  std::vector<std::string> Clouds() override { return {"aws", "docker", "gcp"}; }
  std::vector<std::string> Vms() override { return {"demo", "dev-box"}; }
  std::vector<std::string> GpuTypes(const std::string& cloud) override {
    if (cloud == "aws") return {"A10G:1", "L4:1"};
    return {"A10G:1", "H100:8", "L4:1"};
  }
};

CompletionResult CompleteWords(const std::vector<std::string>& words) {
  FakeSources sources;
  return Complete(kCommands, kGlobals, words, sources);
}

TEST(Complete, OffersVisibleCommandsFirst) {
  EXPECT_THAT(CompleteWords({""}).words,
              ElementsAre("provision", "ssh", "down", "list", "completion", "help"));
  EXPECT_THAT(CompleteWords({"d"}).words, ElementsAre("down"));
  EXPECT_THAT(CompleteWords({"-v", "l"}).words, ElementsAre("list"));
  EXPECT_THAT(CompleteWords({"--output", "json", "s"}).words, ElementsAre("ssh"));
}

TEST(Complete, OffersACommandsFlagsAndTheGlobalOnes) {
  EXPECT_THAT(CompleteWords({"provision", "--"}).words,
              ElementsAre("--cloud", "--file", "--name", "--gpus", "--verbose", "--output"));
  EXPECT_THAT(CompleteWords({"down", "--y"}).words, ElementsAre("--yes"));
}

TEST(Complete, OffersValuesByKind) {
  EXPECT_THAT(CompleteWords({"provision", "--cloud", ""}).words,
              ElementsAre("aws", "docker", "gcp"));
  EXPECT_THAT(CompleteWords({"provision", "-c", "g"}).words, ElementsAre("gcp"));
  EXPECT_THAT(CompleteWords({"ssh", ""}).words, ElementsAre("demo", "dev-box"));
  EXPECT_THAT(CompleteWords({"down", "-y", "dev"}).words, ElementsAre("dev-box"));
  EXPECT_THAT(CompleteWords({"completion", ""}).words, ElementsAre("bash", "zsh", "fish"));
  EXPECT_THAT(CompleteWords({"help", "pro"}).words, ElementsAre("provision"));
}

TEST(Complete, OffersTheGpuTypesOfTheCloudOnTheLine) {
  EXPECT_THAT(CompleteWords({"provision", "--gpus", ""}).words,
              ElementsAre("A10G:1", "H100:8", "L4:1"));
  EXPECT_THAT(CompleteWords({"provision", "--cloud", "aws", "--gpus", ""}).words,
              ElementsAre("A10G:1", "L4:1"));
  EXPECT_THAT(CompleteWords({"provision", "-c", "aws", "-g", "L"}).words, ElementsAre("L4:1"));
  EXPECT_THAT(CompleteWords({"provision", "--cloud=aws", "--gpus=A"}).words,
              ElementsAre("--gpus=A10G:1"));
}

TEST(Complete, NdjsonIsOfferedOnlyWhereTheCommandStreams) {
  EXPECT_THAT(CompleteWords({"list", "-o", ""}).words, ElementsAre("text", "json", "yaml"));
  EXPECT_THAT(CompleteWords({"provision", "--output", ""}).words,
              ElementsAre("text", "json", "yaml", "ndjson"));
}

TEST(Complete, CompletesTheValueAfterAnEqualsSign) {
  EXPECT_THAT(CompleteWords({"provision", "--cloud=d"}).words, ElementsAre("--cloud=docker"));
  EXPECT_THAT(CompleteWords({"list", "--output=y"}).words, ElementsAre("--output=yaml"));
}

TEST(Complete, AsksTheShellForPaths) {
  const CompletionResult r = CompleteWords({"provision", "-f", "spe"});
  EXPECT_TRUE(r.files);
  EXPECT_THAT(r.words, IsEmpty());
}

TEST(Complete, OffersNothingWhereNothingFits) {
  EXPECT_THAT(CompleteWords({"ssh", "demo", ""}).words, IsEmpty());          // ssh takes one name
  EXPECT_THAT(CompleteWords({"ssh", "demo", "--", ""}).words, IsEmpty());    // the remote command
  EXPECT_THAT(CompleteWords({"provision", "--name", ""}).words, IsEmpty());  // a new name
  EXPECT_THAT(CompleteWords({"nosuch", ""}).words, IsEmpty());
  EXPECT_THAT(CompleteWords({"__complete", ""}).words,
              IsEmpty());  // hidden commands are unknown here
  EXPECT_THAT(CompleteWords({"__"}).words, IsEmpty());
}

TEST(CompletionReply, EndsWithTheDirective) {
  CompletionResult r;
  r.words = {"a", "b"};
  EXPECT_EQ(CompletionReply(r), "a\nb\n:done\n");
  r.words.clear();
  r.files = true;
  EXPECT_EQ(CompletionReply(r), ":files\n");
}

TEST(CompletionScript, ExistsForThreeShells) {
  EXPECT_THAT(CompletionScript("bash"), ::testing::HasSubstr("complete -F _gpuprov gpuprov"));
  EXPECT_THAT(CompletionScript("zsh"), ::testing::StartsWith("#compdef gpuprov"));
  EXPECT_THAT(CompletionScript("fish"), ::testing::HasSubstr("complete -c gpuprov"));
  EXPECT_THROW(CompletionScript("tcsh"), Error);
}

}  // namespace
}  // namespace gpuprov
