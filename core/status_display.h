// How a long command shows where it is (issue 16, item 6). Console (console.h) sends every
// phase start, wait and stderr line here:
//  - TerminalStatus: on a terminal, one status line redrawn in place (phase, what it waits for,
//    elapsed); a finished phase is printed once with its time, other lines above the status.
//  - LineStatus: on a pipe, with NO_COLOR or TERM=dumb: one "==> phase" line per phase and the
//    wait lines of before, but at most one per wait every 30 seconds.
//  - NdjsonStatus: --output ndjson: one JSON event per phase change and printed wait line on
//    stdout, {"event", "phase", "elapsed", "message"}, and an "error" event when the command
//    fails; other lines stay on stderr.
// The clock is passed in, so tests drive time; the streams too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>

namespace gpuprov {

class StatusDisplay {
 public:
  using Clock = std::chrono::steady_clock;
  using Now = std::function<Clock::time_point()>;

  virtual ~StatusDisplay() = default;
  /// A new phase starts (the previous one, if any, has finished). \a phase is a short key
  /// ("create", "ssh", ...), \a message what the user reads ("creating VM demo on aws").
  virtual void Phase(std::string_view phase, std::string_view message) = 0;
  /// The phase waits: \a message says for what, \a waited how long this wait has lasted.
  virtual void Waiting(std::string_view message, std::chrono::seconds waited) = 0;
  /// A finished stderr line (prefix and colour included, no newline).
  virtual void Line(std::string_view line) = 0;
  /// Before a question on the terminal: the status line is removed until the next update.
  virtual void Pause() {}
  /// The command ends: the last phase is closed (\a ok false: it failed).
  virtual void Finish(bool ok) = 0;
  /// The command failed with \a message (before Finish(false)); only ndjson reports it.
  virtual void Failed(std::string_view /*message*/) {}
};

/// "12s", "3m05s", "1h02m".
std::string FormatWait(std::chrono::seconds waited);

/// The part of a wait message that names the wait: up to " (" or ":" (so "waiting for VM x to
/// run (state pending)" and "... (state booting)" are one wait).
std::string WaitKey(std::string_view message);

class LineStatus : public StatusDisplay {
 public:
  static constexpr std::chrono::seconds kWaitLineInterval{30};
  LineStatus(std::ostream& err, Now now, bool color);
  void Phase(std::string_view phase, std::string_view message) override;
  void Waiting(std::string_view message, std::chrono::seconds waited) override;
  void Line(std::string_view line) override;
  void Finish(bool ok) override;

 private:
  std::ostream& err_;
  Now now_;
  bool color_;
  std::map<std::string, Clock::time_point> last_wait_line_;  // WaitKey -> when last printed
};

class TerminalStatus : public StatusDisplay {
 public:
  /// \a columns: the terminal's width; the status line is cut to fit (0: not cut), since a
  /// line that wraps could not be redrawn in place.
  TerminalStatus(std::ostream& err, Now now, bool color, int columns = 0);
  ~TerminalStatus() override;
  /// Redraws the status line every \a interval from a thread of its own, so the elapsed time
  /// moves between the callers' updates. Every method is safe against it.
  void StartTicking(std::chrono::milliseconds interval);
  /// One tick: what the thread does each interval (tests call it directly).
  void Tick();
  void Phase(std::string_view phase, std::string_view message) override;
  void Waiting(std::string_view message, std::chrono::seconds waited) override;
  void Line(std::string_view line) override;
  void Pause() override;
  void Finish(bool ok) override;

 private:
  void Clear();
  void Draw();
  void ClosePhase(bool ok);

  std::ostream& err_;
  Now now_;
  bool color_;
  int columns_;
  bool active_ = false;  // a phase is open
  bool drawn_ = false;   // the status line is on the screen
  std::string message_;  // the open phase's message
  std::string waiting_;  // what it waits for, "" when it does not
  Clock::time_point phase_start_;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::jthread ticker_;
};

class NdjsonStatus : public StatusDisplay {
 public:
  NdjsonStatus(std::ostream& out, std::ostream& err, Now now);
  void Phase(std::string_view phase, std::string_view message) override;
  void Waiting(std::string_view message, std::chrono::seconds waited) override;
  void Line(std::string_view line) override;
  void Finish(bool ok) override;
  void Failed(std::string_view message) override;

 private:
  void Event(std::string_view event, std::string_view message);

  std::ostream& out_;
  std::ostream& err_;
  Now now_;
  Clock::time_point start_;
  std::string phase_;
  std::map<std::string, Clock::time_point> last_wait_line_;
};

/// The display for this process: NdjsonStatus when \a ndjson, else TerminalStatus when stderr
/// is a terminal, NO_COLOR is unset and TERM is not "dumb", else LineStatus.
std::unique_ptr<StatusDisplay> MakeStatusDisplay(bool ndjson, bool color);

/// true when stderr is a terminal that can redraw a line: isatty, NO_COLOR unset, TERM set and
/// not "dumb".
bool StderrCanRedraw();

}  // namespace gpuprov
