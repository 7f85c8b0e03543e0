// Runs part of the kit in a forked child process, so that a plugin which
// crashes, aborts or hangs becomes a failed check naming what it was doing,
// and so that the child can act as the plugin's host (dlopen, entry,
// initialize) without touching the parent's libspora.
//
// The child reports through a pipe, one JSON object per line. Its stdout and
// stderr go to a second pipe: plugins must log through the host, never print,
// so anything written there is reported too.
//
// Fork only while the parent is single-threaded (before the parent loads any
// plugin): the child inherits no other threads.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report.h"

namespace spora::conformance {

// The child's side: what it tells the parent.
class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  // About to run `what` (work item `item` of the caller's list, or -1); if
  // the child dies or hangs, the parent names it.
  void begin(const std::string& what, int64_t item = -1);
  void result(const std::string& part, const std::string& name, Status status, const std::string& detail = "");
  void case_result(const CaseResult& r);
  // A fact for the parent ("info", "kernel_ops", ...).
  void fact(const std::string& key, const nlohmann::json& value);

 private:
  void send(const nlohmann::json& j);
  int fd_;
};

struct ChildOutcome {
  std::vector<CheckResult> results;
  std::vector<CaseResult> cases;
  nlohmann::json facts = nlohmann::json::object();
  std::string output;       // what the child wrote to stdout/stderr
  std::string last_begun;   // the last check the child started
  int64_t last_item = -1;   // its work item, or -1
  bool finished = false;    // reached the end of the body and exited 0
  std::string death;        // "killed by signal 11 (Segmentation fault)", "timed out after 120 s", "exit status 3"
};

// Forks, runs `body` in the child (which then _exits) and collects what it
// reported. The child is killed when it reports nothing for `timeout_s`
// seconds (each begin() counts as progress). Never throws for anything the
// child does.
ChildOutcome run_child(const std::function<void(Channel&)>& body, double timeout_s);

}  // namespace spora::conformance
