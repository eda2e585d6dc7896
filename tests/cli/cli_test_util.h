// Helpers for the CLI's unit tests: the fixture directory and loading a
// capture the way `fastclock doctor --root DIR` does.
#pragma once

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

extern "C" {
#include "facts.h"
#include "findings.h"
#include "probe.h"
#include "sysparse.h"
}

namespace clitest {

inline std::string fixture(const std::string &name) { return std::string(CLI_FIXTURES) + "/" + name; }

inline std::string slurp(const std::string &path)
{
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Loads a capture into *f (as `doctor --root` does); returns the loader's error or "".
inline std::string load(const std::string &dir, doctor_facts *f)
{
    facts_init(f);
    probe_files(f, dir.c_str());
    char err[512] = "";
    if (fixture_load(f, dir.c_str(), err, sizeof err) != 0)
        return err[0] ? err : "failed without a message";
    facts_choose_frequency(f);
    return "";
}

inline std::string ids(const findings &fs)
{
    std::string s;
    for (int i = 0; i < fs.n; i++)
        s += std::string(s.empty() ? "" : " ") + severity_name(fs.f[i].severity) + ":" + fs.f[i].id;
    return s;
}

}  // namespace clitest
