#include "status_display.h"

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <thread>

namespace gpuprov {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

/// A clock the test moves by hand.
struct FakeClock {
  StatusDisplay::Clock::time_point now{};
  StatusDisplay::Now fn() {
    return [this] { return now; };
  }
  void Advance(seconds s) { now += s; }
};

int CountOf(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t pos = text.find(part); pos != std::string::npos; pos = text.find(part, pos + 1)) {
    ++n;
  }
  return n;
}

TEST(FormatWait, ReadsAsSecondsMinutesOrHours) {
  EXPECT_EQ(FormatWait(seconds(7)), "7s");
  EXPECT_EQ(FormatWait(seconds(185)), "3m05s");
  EXPECT_EQ(FormatWait(seconds(3720)), "1h02m");
}

TEST(WaitKey, IgnoresTheChangingDetail) {
  EXPECT_EQ(WaitKey("waiting for VM demo to run (state pending)"), "waiting for VM demo to run");
  EXPECT_EQ(WaitKey("validating: coredns"), "validating");
  EXPECT_EQ(WaitKey("waiting for SSH on 127.0.0.1:2222"), "waiting for SSH on 127.0.0.1");
}

TEST(LineStatus, PrintsAWaitAtMostOnceEvery30Seconds) {
  std::ostringstream err;
  FakeClock clock;
  LineStatus status(err, clock.fn(), false);
  status.Phase("create", "creating VM demo on aws");
  // A 15-minute wait polled every 5 s: 180 calls.
  for (int s = 5; s <= 900; s += 5) {
    clock.Advance(seconds(5));
    status.Waiting(
        "waiting for VM demo to run (state " + std::string(s < 450 ? "pending" : "booting") + ")",
        seconds(s));
  }
  const std::string out = err.str();
  EXPECT_THAT(out, HasSubstr("==> creating VM demo on aws\n"));
  EXPECT_THAT(out, HasSubstr("  waiting for VM demo to run (state pending) ... 5s\n"));
  EXPECT_THAT(out, HasSubstr("  waiting for VM demo to run (state pending) ... 35s\n"));
  EXPECT_EQ(CountOf(out, "waiting for VM demo"), 30);  // 900 s / 30 s
}

TEST(LineStatus, EachWaitAndEachPhaseHasItsOwnAllowance) {
  std::ostringstream err;
  FakeClock clock;
  LineStatus status(err, clock.fn(), false);
  status.Phase("install", "installing k3s over SSH");
  status.Waiting("waiting for the boot install (cloud-init running)", seconds(1));
  status.Waiting("validating: coredns", seconds(1));  // another wait: printed
  clock.Advance(seconds(10));
  status.Waiting("validating: gpu", seconds(11));  // the same wait within 30 s: not printed
  status.Phase("access", "checking the API");
  status.Waiting("validating: gpu", seconds(12));  // a new phase: printed
  const std::string out = err.str();
  EXPECT_EQ(CountOf(out, "waiting for the boot install"), 1);
  EXPECT_EQ(CountOf(out, "validating: coredns"), 1);
  EXPECT_EQ(CountOf(out, "validating: gpu ... 11s"), 0);
  EXPECT_EQ(CountOf(out, "validating: gpu ... 12s"), 1);
}

TEST(LineStatus, PassesOtherLinesThrough) {
  std::ostringstream err;
  FakeClock clock;
  LineStatus status(err, clock.fn(), false);
  status.Line("note: hello");
  status.Finish(true);
  EXPECT_EQ(err.str(), "note: hello\n");
}

TEST(TerminalStatus, RedrawsOneLineAndPrintsAFinishedPhaseOnceWithItsTime) {
  std::ostringstream err;
  FakeClock clock;
  TerminalStatus status(err, clock.fn(), false);
  status.Phase("create", "creating VM demo on aws");
  for (int s = 1; s <= 120; ++s) {
    clock.Advance(seconds(1));
    status.Waiting("waiting for VM demo to run (state pending)", seconds(s));
  }
  status.Phase("ssh", "waiting for SSH on 1.2.3.4");
  clock.Advance(seconds(3));
  status.Finish(true);
  const std::string out = err.str();
  // Every redraw starts by clearing the line; no redraw ends a line.
  EXPECT_THAT(out, HasSubstr("\r\033[K... creating VM demo on aws: waiting for VM demo to run "
                             "(state pending) (2m00s)"));
  EXPECT_EQ(CountOf(out, "\n"), 2);  // the two finished phases, nothing else
  EXPECT_THAT(out, HasSubstr("\r\033[K==> creating VM demo on aws (120.0s)\n"));
  EXPECT_THAT(out, HasSubstr("==> waiting for SSH on 1.2.3.4 (3.0s)\n"));
}

TEST(TerminalStatus, AWaitNamedLikeItsPhaseIsShownOnce) {
  std::ostringstream err;
  FakeClock clock;
  TerminalStatus status(err, clock.fn(), false);
  status.Phase("ssh", "waiting for SSH on 1.2.3.4");
  clock.Advance(seconds(3));
  status.Waiting("waiting for SSH on 1.2.3.4", seconds(3));
  EXPECT_THAT(err.str(), ::testing::EndsWith("\r\033[K... waiting for SSH on 1.2.3.4 (3s)"));
}

TEST(TerminalStatus, CutsTheStatusLineToTheTerminalsWidth) {
  std::ostringstream err;
  FakeClock clock;
  TerminalStatus status(err, clock.fn(), false, 40);
  status.Phase("create", "creating VM a-rather-long-name on digitalocean");
  clock.Advance(seconds(75));
  status.Waiting("waiting for VM a-rather-long-name to run (state new)", seconds(75));
  const std::string out = err.str();
  const std::string last = out.substr(out.rfind("\r\033[K") + 4);
  EXPECT_EQ(last, "... creating VM a-rather-lon... (1m15s)");
  EXPECT_LT(last.size(), 40u);
}

TEST(TerminalStatus, PrintsOtherLinesAboveTheStatusLine) {
  std::ostringstream err;
  FakeClock clock;
  TerminalStatus status(err, clock.fn(), false);
  status.Phase("create", "creating VM demo");
  clock.Advance(seconds(4));
  status.Line("note: reusing existing VM demo");
  const std::string out = err.str();
  const size_t note = out.find("\r\033[Knote: reusing existing VM demo\n");
  ASSERT_NE(note, std::string::npos);
  // The status line is drawn again after the note.
  EXPECT_NE(out.find("... creating VM demo (4s)", note), std::string::npos);
}

TEST(TerminalStatus, ATickRedrawsTheElapsedTimeBetweenUpdates) {
  std::ostringstream err;
  FakeClock clock;
  TerminalStatus status(err, clock.fn(), false);
  status.Phase("create", "forwarding 127.0.0.1:16443");
  clock.Advance(seconds(7));
  status.Tick();
  EXPECT_THAT(err.str(), ::testing::EndsWith("\r\033[K... forwarding 127.0.0.1:16443 (7s)"));
  status.Pause();  // not drawn: a tick leaves the screen alone (a question may be on it)
  const std::string before = err.str();
  status.Tick();
  EXPECT_EQ(err.str(), before);
}

TEST(TerminalStatus, TheTickerThreadRedrawsAndStopsWithTheDisplay) {
  std::ostringstream err;
  FakeClock clock;
  {
    TerminalStatus status(err, clock.fn(), false);
    status.Phase("create", "creating");
    status.StartTicking(std::chrono::milliseconds(5));
    for (int i = 0; i < 40; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      status.Line("x");  // the main thread writes meanwhile; the mutex keeps lines whole
    }
  }  // the thread is joined here: err is read only afterwards
  // 40 lines each redraw once; the ticks add more redraws of their own.
  EXPECT_GT(CountOf(err.str(), "\r\033[K... creating (0s)"), 41);
  EXPECT_EQ(CountOf(err.str(), "\r\033[Kx\n"), 40);
}

TEST(TerminalStatus, AFailedPhaseSaysSo) {
  std::ostringstream err;
  FakeClock clock;
  TerminalStatus status(err, clock.fn(), false);
  status.Phase("ssh", "waiting for SSH");
  clock.Advance(seconds(2));
  status.Finish(false);
  status.Finish(false);  // a second Finish prints nothing more
  EXPECT_EQ(CountOf(err.str(), "==> waiting for SSH (failed after 2.0s)\n"), 1);
}

TEST(TerminalStatus, PauseRemovesTheStatusLineForAQuestion) {
  std::ostringstream err;
  FakeClock clock;
  TerminalStatus status(err, clock.fn(), false);
  status.Phase("check", "checking aws credentials");
  status.Pause();
  const std::string out = err.str();
  EXPECT_EQ(out.substr(out.size() - 4), "\r\033[K");
}

Poco::JSON::Object::Ptr ParseLine(const std::string& line) {
  Poco::JSON::Parser parser;
  return parser.parse(line).extract<Poco::JSON::Object::Ptr>();
}

TEST(NdjsonStatus, WritesOneEventPerPhaseAndPrintedWait) {
  std::ostringstream out, err;
  FakeClock clock;
  NdjsonStatus status(out, err, clock.fn());
  clock.Advance(seconds(2));
  status.Phase("create", "creating VM demo on aws");
  for (int s = 1; s <= 60; ++s) {
    clock.Advance(seconds(1));
    status.Waiting("waiting for VM demo to run (state pending)", seconds(s));
  }
  status.Line("note: to stderr");
  std::istringstream lines(out.str());
  std::vector<Poco::JSON::Object::Ptr> events;
  for (std::string line; std::getline(lines, line);) events.push_back(ParseLine(line));
  ASSERT_EQ(events.size(), 3u);  // the phase, then waits at 1 s and 31 s
  EXPECT_EQ(events[0]->getValue<std::string>("event"), "phase");
  EXPECT_EQ(events[0]->getValue<std::string>("phase"), "create");
  EXPECT_DOUBLE_EQ(events[0]->getValue<double>("elapsed"), 2.0);
  EXPECT_EQ(events[0]->getValue<std::string>("message"), "creating VM demo on aws");
  EXPECT_EQ(events[1]->getValue<std::string>("event"), "progress");
  EXPECT_EQ(events[1]->getValue<std::string>("phase"), "create");
  EXPECT_DOUBLE_EQ(events[1]->getValue<double>("elapsed"), 3.0);
  EXPECT_DOUBLE_EQ(events[2]->getValue<double>("elapsed"), 33.0);
  EXPECT_EQ(err.str(), "note: to stderr\n");
}

TEST(NdjsonStatus, AFailureIsTheLastEvent) {
  std::ostringstream out, err;
  FakeClock clock;
  NdjsonStatus status(out, err, clock.fn());
  status.Phase("ssh", "waiting for SSH on 1.2.3.4");
  clock.Advance(seconds(4));
  status.Failed("SSH on 1.2.3.4 did not answer within 3s");
  status.Finish(false);
  const std::string text = out.str();
  const std::string last = text.substr(text.rfind('\n', text.size() - 2) + 1);
  Poco::JSON::Object::Ptr event = ParseLine(last);
  EXPECT_EQ(event->getValue<std::string>("event"), "error");
  EXPECT_EQ(event->getValue<std::string>("phase"), "ssh");
  EXPECT_DOUBLE_EQ(event->getValue<double>("elapsed"), 4.0);
  EXPECT_EQ(event->getValue<std::string>("message"), "SSH on 1.2.3.4 did not answer within 3s");
}

}  // namespace
}  // namespace gpuprov
