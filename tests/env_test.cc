// Configuration through the environment, checked in fresh processes: a bad
// value is reported once, in words a user understands, and ignored.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace {

struct ProbeRun {
    int status = -1;
    std::string out, err;
};

std::string field(const std::string &out, const std::string &key)
{
    auto p = out.find(key + "=");
    if (p == std::string::npos)
        return "";
    auto e = out.find('\n', p);
    return out.substr(p + key.size() + 1, e - p - key.size() - 1);
}

std::string drain(int fd)
{
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        s.append(buf, size_t(n));
    close(fd);
    return s;
}

ProbeRun probe(const std::vector<std::string> &env)
{
    std::vector<std::string> envs;
    for (char **e = environ; *e; e++) {
        std::string s = *e;
        if (s.rfind("FASTCLOCK_", 0) != 0)
            envs.push_back(s);
    }
    for (auto &e : env)
        envs.push_back(e);
    std::vector<char *> envp;
    for (auto &e : envs)
        envp.push_back(const_cast<char *>(e.c_str()));
    envp.push_back(nullptr);
    int out[2], err[2];
    EXPECT_EQ(pipe(out), 0);
    EXPECT_EQ(pipe(err), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    std::string path = STATUS_PROBE;
    char *argv[] = {const_cast<char *>(path.c_str()), nullptr};
    pid_t pid;
    ProbeRun r;
    EXPECT_EQ(posix_spawn(&pid, path.c_str(), &fa, nullptr, argv, envp.data()), 0);
    close(out[1]);
    close(err[1]);
    r.out = drain(out[0]);
    r.err = drain(err[0]);
    waitpid(pid, &r.status, 0);
    posix_spawn_file_actions_destroy(&fa);
    return r;
}

int count(const std::string &s, const std::string &what)
{
    int n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
        n++;
    return n;
}

} // namespace

TEST(Environment, DefaultsAreQuiet)
{
    ProbeRun r = probe({});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(field(r.out, "forced"), "0");
    EXPECT_EQ(field(r.out, "calibrator"), field(r.out, "mode") == "tsc" ? "thread" : "none");
}

TEST(Environment, BogusModeIsReportedOnceAndIgnored)
{
    ProbeRun r = probe({"FASTCLOCK_MODE=bogus"});
    ASSERT_EQ(r.status, 0);
    EXPECT_EQ(count(r.err, "FASTCLOCK_MODE=bogus"), 1) << r.err;
    EXPECT_NE(r.err.find("must be auto, tsc, percpu or system"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("using auto"), std::string::npos) << r.err;
    EXPECT_EQ(field(r.out, "forced"), "0");
    ProbeRun dflt = probe({});
    EXPECT_EQ(field(r.out, "mode"), field(dflt.out, "mode"));
}

TEST(Environment, ModesAreCaseAndSpaceTolerant)
{
    ProbeRun r = probe({"FASTCLOCK_MODE= System "});
    ASSERT_EQ(r.status, 0);
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(field(r.out, "mode"), "system");
    EXPECT_EQ(field(r.out, "forced"), "1");
    EXPECT_NE(field(r.out, "reason").find("FASTCLOCK_MODE=system"), std::string::npos);
    r = probe({"FASTCLOCK_MODE=auto"});
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(field(r.out, "forced"), "0");
}

TEST(Environment, ForcedTscSaysSo)
{
    ProbeRun dflt = probe({});
    if (field(dflt.out, "mode") != "tsc")
        GTEST_SKIP() << "this machine does not run tsc: " << field(dflt.out, "reason");
    ProbeRun r = probe({"FASTCLOCK_MODE=tsc"});
    EXPECT_EQ(field(r.out, "mode"), "tsc");
    EXPECT_EQ(field(r.out, "forced"), "1");
    EXPECT_EQ(field(r.out, "reason").rfind("FASTCLOCK_MODE=tsc", 0), 0u) << r.out;
}

TEST(Environment, CalibratorChoice)
{
    ProbeRun dflt = probe({});
    if (field(dflt.out, "mode") != "tsc")
        GTEST_SKIP() << "no calibrator outside mode tsc";
    ProbeRun r = probe({"FASTCLOCK_CALIBRATOR=lazy"});
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(field(r.out, "calibrator"), "lazy");
    r = probe({"FASTCLOCK_CALIBRATOR=sometimes"});
    EXPECT_EQ(count(r.err, "FASTCLOCK_CALIBRATOR=sometimes"), 1) << r.err;
    EXPECT_EQ(field(r.out, "calibrator"), "thread");
}
