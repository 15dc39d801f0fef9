#include "status_display.h"

#include <Poco/JSON/Object.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "output.h"

namespace gpuprov {
namespace {

constexpr const char* kClearLine = "\r\033[K";

double SecondsBetween(StatusDisplay::Clock::time_point from, StatusDisplay::Clock::time_point to) {
  const double s = std::chrono::duration<double>(to - from).count();
  return std::round(s * 10) / 10;
}

std::string OneDecimal(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  return buf;
}

/// Whether the wait named by \a message may print a line now (at most one per interval).
bool WaitLineDue(std::map<std::string, StatusDisplay::Clock::time_point>& last,
                 std::string_view message, StatusDisplay::Clock::time_point now,
                 std::chrono::seconds interval) {
  const std::string key = WaitKey(message);
  auto it = last.find(key);
  if (it != last.end() && now - it->second < interval) return false;
  last[key] = now;
  return true;
}

}  // namespace

std::string FormatWait(std::chrono::seconds waited) {
  const long s = static_cast<long>(waited.count());
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%lds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

std::string WaitKey(std::string_view message) {
  size_t end = message.find(" (");
  end = std::min(end, message.find(':'));
  return std::string(message.substr(0, end));
}

// ---- LineStatus ---------------------------------------------------------------------------

LineStatus::LineStatus(std::ostream& err, Now now, bool color)
    : err_(err), now_(std::move(now)), color_(color) {}

void LineStatus::Phase(std::string_view, std::string_view message) {
  last_wait_line_.clear();
  if (color_) {
    err_ << "\033[1;34m==> \033[0m" << message << '\n';
  } else {
    err_ << "==> " << message << '\n';
  }
  err_.flush();
}

void LineStatus::Waiting(std::string_view message, std::chrono::seconds waited) {
  if (!WaitLineDue(last_wait_line_, message, now_(), kWaitLineInterval)) return;
  err_ << "  " << message << " ... " << waited.count() << "s\n";
  err_.flush();
}

void LineStatus::Line(std::string_view line) {
  err_ << line << '\n';
  err_.flush();
}

void LineStatus::Finish(bool) {}

// ---- TerminalStatus -----------------------------------------------------------------------

TerminalStatus::TerminalStatus(std::ostream& err, Now now, bool color, int columns)
    : err_(err), now_(std::move(now)), color_(color), columns_(columns) {}

TerminalStatus::~TerminalStatus() {
  if (ticker_.joinable()) {
    ticker_.request_stop();
    wake_.notify_all();
    ticker_.join();
  }
}

void TerminalStatus::StartTicking(std::chrono::milliseconds interval) {
  ticker_ = std::jthread([this, interval](std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      wake_.wait_for(lock, stop, interval, [] { return false; });
      if (stop.stop_requested()) break;
      if (drawn_) Draw();
    }
  });
}

void TerminalStatus::Tick() {
  std::lock_guard lock(mutex_);
  if (drawn_) Draw();
}

void TerminalStatus::Clear() {
  if (drawn_) err_ << kClearLine;
  drawn_ = false;
}

void TerminalStatus::Draw() {
  if (!active_) return;
  const auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(now_() - phase_start_);
  std::string text = message_;
  if (!waiting_.empty()) text += ": " + waiting_;
  const std::string suffix = " (" + FormatWait(elapsed) + ")";
  // "... " + text + suffix must stay shorter than the terminal: cut the text's end.
  if (columns_ > 0) {
    const size_t room = static_cast<size_t>(std::max(columns_ - 1, 0));
    const size_t fixed = 4 + suffix.size();
    if (fixed + text.size() > room) {
      text = room > fixed + 3 ? text.substr(0, room - fixed - 3) + "..." : std::string();
    }
  }
  err_ << kClearLine << (color_ ? "\033[1;34m... \033[0m" : "... ") << text << suffix;
  err_.flush();
  drawn_ = true;
}

void TerminalStatus::ClosePhase(bool ok) {
  if (!active_) return;
  Clear();
  const std::string took = OneDecimal(SecondsBetween(phase_start_, now_()));
  if (color_) {
    err_ << (ok ? "\033[1;32m==> \033[0m" : "\033[1;31m==> \033[0m");
  } else {
    err_ << "==> ";
  }
  err_ << message_ << (ok ? " (" : " (failed after ") << took << ")\n";
  err_.flush();
  active_ = false;
  waiting_.clear();
}

void TerminalStatus::Phase(std::string_view, std::string_view message) {
  std::lock_guard lock(mutex_);
  ClosePhase(true);
  active_ = true;
  message_ = message;
  waiting_.clear();
  phase_start_ = now_();
  Draw();
}

void TerminalStatus::Waiting(std::string_view message, std::chrono::seconds) {
  std::lock_guard lock(mutex_);
  if (!active_) {
    // A wait outside a phase (tunnel, gc): it is its own status line.
    active_ = true;
    message_ = message;
    phase_start_ = now_();
  } else {
    // "waiting for SSH on X" in the phase "waiting for SSH on X" says nothing new.
    waiting_ = message == message_ ? std::string() : std::string(message);
  }
  Draw();
}

void TerminalStatus::Line(std::string_view line) {
  std::lock_guard lock(mutex_);
  Clear();
  err_ << line << '\n';
  Draw();
}

void TerminalStatus::Pause() {
  std::lock_guard lock(mutex_);
  Clear();
  err_.flush();
}

void TerminalStatus::Finish(bool ok) {
  std::lock_guard lock(mutex_);
  ClosePhase(ok);
}

// ---- NdjsonStatus -------------------------------------------------------------------------

NdjsonStatus::NdjsonStatus(std::ostream& out, std::ostream& err, Now now)
    : out_(out), err_(err), now_(std::move(now)), start_(now_()) {}

void NdjsonStatus::Event(std::string_view event, std::string_view message) {
  Poco::JSON::Object::Ptr o = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
  o->set("event", std::string(event));
  o->set("phase", phase_);
  o->set("elapsed", SecondsBetween(start_, now_()));
  o->set("message", std::string(message));
  out_ << RenderJsonLine(o);
  out_.flush();
}

void NdjsonStatus::Phase(std::string_view phase, std::string_view message) {
  phase_ = phase;
  last_wait_line_.clear();
  Event("phase", message);
}

void NdjsonStatus::Waiting(std::string_view message, std::chrono::seconds) {
  if (!WaitLineDue(last_wait_line_, message, now_(), LineStatus::kWaitLineInterval)) return;
  Event("progress", message);
}

void NdjsonStatus::Line(std::string_view line) {
  err_ << line << '\n';
  err_.flush();
}

void NdjsonStatus::Finish(bool) {}

void NdjsonStatus::Failed(std::string_view message) { Event("error", message); }

// ---- choice -------------------------------------------------------------------------------

bool StderrCanRedraw() {
  if (!isatty(STDERR_FILENO)) return false;
  if (std::getenv("NO_COLOR") != nullptr) return false;
  const char* term = std::getenv("TERM");
  return term != nullptr && *term != '\0' && std::string_view(term) != "dumb";
}

std::unique_ptr<StatusDisplay> MakeStatusDisplay(bool ndjson, bool color) {
  StatusDisplay::Now now = [] { return StatusDisplay::Clock::now(); };
  if (ndjson) return std::make_unique<NdjsonStatus>(std::cout, std::cerr, now);
  if (StderrCanRedraw()) {
    struct winsize size {};
    const int columns = ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 ? size.ws_col : 0;
    auto status = std::make_unique<TerminalStatus>(std::cerr, now, color, columns);
    status->StartTicking(std::chrono::seconds(1));
    return status;
  }
  return std::make_unique<LineStatus>(std::cerr, now, color);
}

}  // namespace gpuprov
