// The agent's parts: the exposition formats, a process's job from its cgroup,
// and the bounded sliding window.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "src/agent/exposition.h"
#include "src/agent/job_identity.h"
#include "src/agent/sample_window.h"
#include "src/net/web_config.h"
#include "src/util/yaml_tree.h"

namespace gputriage {
namespace {

TEST(Exposition, TextFormatEscapesAndTypes) {
  Exposition e;
  e.Family("DCGM_FI_DEV_GPU_UTIL", Exposition::Type::kGauge, "GPU utilization (in %).");
  e.Sample({{"gpu", "0"}, {"modelName", "NVIDIA \"H100\"\\80GB\nx"}}, 97);
  e.Family("gputriage_agent_scrapes", Exposition::Type::kCounter, "Scrapes.");
  e.Sample({}, 12);
  e.Family("gputriage_empty", Exposition::Type::kGauge, "Nothing: left out.");
  e.Family("gputriage_agent", Exposition::Type::kInfo, "Info.");
  e.Sample({{"version", "1"}}, 0);
  e.Family("gputriage_nan", Exposition::Type::kGauge, "Special values.");
  e.Sample({{"k", "nan"}}, std::nan(""));
  e.Sample({{"k", "inf"}}, INFINITY);
  e.Sample({{"k", "small"}}, 0.1 + 0.2);
  const std::string text = e.Render(Exposition::Format::kPrometheusText);
  EXPECT_EQ(text,
            "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
            "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",modelName=\"NVIDIA \\\"H100\\\"\\\\80GB\\nx\"} 97\n"
            "# HELP gputriage_agent_scrapes_total Scrapes.\n"
            "# TYPE gputriage_agent_scrapes_total counter\n"
            "gputriage_agent_scrapes_total 12\n"
            "# HELP gputriage_agent_info Info.\n"
            "# TYPE gputriage_agent_info gauge\n"
            "gputriage_agent_info{version=\"1\"} 1\n"
            "# HELP gputriage_nan Special values.\n"
            "# TYPE gputriage_nan gauge\n"
            "gputriage_nan{k=\"nan\"} NaN\n"
            "gputriage_nan{k=\"inf\"} +Inf\n"
            "gputriage_nan{k=\"small\"} 0.30000000000000004\n");
  const std::string om = e.Render(Exposition::Format::kOpenMetrics);
  EXPECT_NE(om.find("# TYPE gputriage_agent_scrapes counter\ngputriage_agent_scrapes_total 12\n"), std::string::npos) << om;
  EXPECT_NE(om.find("# TYPE gputriage_agent info\ngputriage_agent_info{version=\"1\"} 1\n"), std::string::npos) << om;
  EXPECT_TRUE(om.size() > 6 && om.substr(om.size() - 6) == "# EOF\n");
}

TEST(Exposition, LabelValuesAreAlwaysValidUtf8) {
  // Any user can name a process with bytes that are not UTF-8 (prctl
  // PR_SET_NAME); Prometheus drops a whole scrape over one such label value.
  EXPECT_EQ(EscapeLabelValue("train\xff\xfe"), "train\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(EscapeLabelValue("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x9a\x80"), "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x9a\x80");
  EXPECT_EQ(EscapeLabelValue("cut\xe2\x86"), "cut\xEF\xBF\xBD\xEF\xBF\xBD");           // a sequence cut short
  EXPECT_EQ(EscapeLabelValue("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");                 // overlong '/'
  EXPECT_EQ(EscapeLabelValue("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(EscapeLabelValue("\xf4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // past U+10FFFF
  EXPECT_EQ(EscapeLabelValue("a\"b\xff\n"), "a\\\"b\xEF\xBF\xBD\\n");
}

TEST(Exposition, NegotiatesOpenMetricsOnlyWhenAsked) {
  EXPECT_EQ(Exposition::Negotiate(""), Exposition::Format::kPrometheusText);
  EXPECT_EQ(Exposition::Negotiate("text/plain;version=0.0.4;q=0.5,*/*;q=0.1"), Exposition::Format::kPrometheusText);
  // Prometheus 2.x's scrape Accept header.
  EXPECT_EQ(Exposition::Negotiate("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                                  "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
            Exposition::Format::kOpenMetrics);
  EXPECT_TRUE(Exposition::ValidName("DCGM_FI_DEV_GPU_UTIL"));
  EXPECT_TRUE(Exposition::ValidName("a:b"));
  EXPECT_FALSE(Exposition::ValidName("a:b", /*label=*/true));
  EXPECT_FALSE(Exposition::ValidName("0abc"));
  EXPECT_FALSE(Exposition::ValidName(""));
}

TEST(JobIdentity, KubernetesPodFromEitherCgroupDriver) {
  // cgroup v2, systemd driver (kubelet default since 1.22).
  JobIdentity a = IdentityFromCgroup(
      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8a4b2c1d_1e2f_4a5b_9c8d_7e6f5a4b3c2d.slice/"
      "cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n");
  EXPECT_EQ(a.pod_uid, "8a4b2c1d-1e2f-4a5b-9c8d-7e6f5a4b3c2d");
  EXPECT_EQ(a.container_id, "0123456789ab");
  // cgroup v1, cgroupfs driver.
  JobIdentity b = IdentityFromCgroup(
      "12:devices:/kubepods/besteffort/pod8a4b2c1d-1e2f-4a5b-9c8d-7e6f5a4b3c2d/"
      "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210\n"
      "11:memory:/kubepods/besteffort/pod8a4b2c1d-1e2f-4a5b-9c8d-7e6f5a4b3c2d/"
      "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210\n");
  EXPECT_EQ(b.pod_uid, "8a4b2c1d-1e2f-4a5b-9c8d-7e6f5a4b3c2d");
  EXPECT_EQ(b.container_id, "fedcba987654");
  EXPECT_EQ(b.Key(), "pod:8a4b2c1d-1e2f-4a5b-9c8d-7e6f5a4b3c2d/fedcba987654");
  // Slurm.
  JobIdentity c = IdentityFromCgroup("0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n");
  EXPECT_EQ(c.slurm_job, "4242");
  EXPECT_EQ(c.Key(), "slurm:4242");
  // A login session, and a docker container outside Kubernetes: the process is the job.
  EXPECT_TRUE(IdentityFromCgroup("0::/user.slice/user-1000.slice/session-3.scope\n").Key().empty());
  JobIdentity d = IdentityFromCgroup(
      "0::/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n");
  EXPECT_TRUE(d.pod_uid.empty());
  EXPECT_TRUE(d.container_id.empty());
  // Not a UID: left alone.
  EXPECT_TRUE(IdentityFromCgroup("0::/kubepods/podnotauid/abc\n").pod_uid.empty());
}

TEST(JobIdentity, TheGpusJobIsItsFirstContainerizedProcess) {
  const auto root = std::filesystem::temp_directory_path() / "gputriage_agent_proc";
  std::filesystem::remove_all(root);
  auto write = [&](unsigned pid, const std::string& cgroup, const std::string& comm) {
    std::filesystem::create_directories(root / std::to_string(pid));
    std::ofstream(root / std::to_string(pid) / "cgroup") << cgroup;
    std::ofstream(root / std::to_string(pid) / "comm") << comm << "\n";
  };
  write(100, "0::/user.slice/session-1.scope\n", "nvidia-smi");
  write(200, "0::/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/"
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", "python");
  JobIdentity job = JobOfProcesses({200, 100, 999}, root.string());
  EXPECT_EQ(job.pod_uid, "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(job.pid, 200u);
  JobIdentity plain = JobOfProcesses({100, 999}, root.string());
  EXPECT_EQ(plain.Key(), "pid:100");
  EXPECT_EQ(plain.command, "nvidia-smi");
  Labels labels = plain.ToLabels();
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels[0].second, "nvidia-smi (pid 100)");
  EXPECT_EQ(labels[1], (std::pair<std::string, std::string>("job_source", "process")));
  EXPECT_EQ(JobIdentity{}.ToLabels(), (Labels{{"job_source", "none"}}));  // said, not left to the scrape target's labels
  EXPECT_TRUE(JobOfProcesses({999}, root.string()).empty());  // gone
  EXPECT_TRUE(JobOfProcesses({}, root.string()).empty());
  std::filesystem::remove_all(root);
}

TEST(SampleWindow, KeepsOnlyTheWindowInTimeOrder) {
  SampleWindow w(10 * kNsPerS);
  for (int i = 0; i < 100; ++i) w.Add(1, Metric::kGpuUtil, i * kNsPerS, i);
  EXPECT_EQ(w.values(), 11u);  // t = 89..99 s
  w.Add(1, Metric::kGpuUtil, 50 * kNsPerS, 5);  // out of order: dropped
  EXPECT_EQ(w.values(), 11u);
  EXPECT_EQ(w.Span(1), std::make_pair(89 * kNsPerS, 99 * kNsPerS));
  EXPECT_EQ(w.Span(0), std::make_pair(TimeNs{0}, TimeNs{0}));
  MetricSet out;
  auto pos = out.FindOrAdd(0, "GPU-a", "", -1);
  EXPECT_EQ(w.Replay(1, out, *pos), 11);
  EXPECT_DOUBLE_EQ(out.devices[0].Get(Metric::kGpuUtil).max(), 99);
  EXPECT_DOUBLE_EQ(out.devices[0].Get(Metric::kGpuUtil).min(), 89);
  w.Prune(200 * kNsPerS);
  EXPECT_EQ(w.values(), 0u);
  w.Add(3, Metric::kPowerW, 300 * kNsPerS, 1);
  w.Forget(3);
  EXPECT_EQ(w.values(), 0u);
  w.Add(MetricSet::kMaxDevices, Metric::kPowerW, 1, 1);  // past the bound: ignored
  EXPECT_EQ(w.values(), 0u);
}

TEST(SampleWindow, ReplaysOneSampleTimeAtATime) {
  // The readings of one sample time reach MetricSet::Add together, so a window's
  // power and clocks under load (LoadedReadings) are joined as a log's are.
  SampleWindow w(60 * kNsPerS);
  for (int i = 0; i < 30; ++i) {
    w.Add(0, Metric::kGpuUtil, i * kNsPerS, i < 20 ? 100 : 0);
    w.Add(0, Metric::kPowerW, i * kNsPerS, i < 20 ? 348 : 60);
    w.Add(0, Metric::kSmClockMHz, i * kNsPerS, i < 20 ? 1000 + i : 345);
  }
  MetricSet out;
  auto pos = out.FindOrAdd(0, "GPU-a", "", -1);
  EXPECT_EQ(w.Replay(0, out, *pos), 90);
  const LoadedReadings loaded = out.devices[0].loaded.Settled();
  EXPECT_EQ(loaded.sm_clock_mhz.samples, 20);
  EXPECT_EQ(loaded.power_w.samples, 20);
  EXPECT_NEAR(loaded.sm_clock_mhz.Mean(), 1010.0, 0.6);  // the first sample stands for an instant
  EXPECT_DOUBLE_EQ(loaded.power_w.max, 348);
}

TEST(SampleWindow, AFastSeriesIsCappedNotUnbounded) {
  SampleWindow w(3600 * kNsPerS);
  for (int64_t i = 0; i < 150'000; ++i) w.Add(0, Metric::kGpuUtil, i * kNsPerMs, 1);
  EXPECT_EQ(w.values(), SampleWindow::kMaxValuesPerSeries);
}

}  // namespace
}  // namespace gputriage

// ---- the web config (exporter-toolkit's format) ----

namespace gputriage {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// bcrypt of "s3cret" at cost 4 (made once with Python's crypt module).
constexpr const char* kS3cretHash = "$2b$04$Idu1dCQO5HZJ1rvlsMvFNuJF7B7zdvqqptLLzkAIJ7ZUKPEiTZ.kK";

TEST(YamlTree, KeepsOrderLinesAndNulls) {
  auto doc = ParseYaml("a: 1\nb:\n  - x\n  - 'y'\nc:\nd: ~\n", "t.yml");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  ASSERT_EQ(doc->members.size(), 4u);
  EXPECT_EQ(doc->members[0].key, "a");
  EXPECT_EQ(doc->Find("a")->scalar, "1");
  EXPECT_EQ(doc->Find("b")->items.size(), 2u);
  EXPECT_EQ(doc->Find("b")->items[1].line, 4);
  EXPECT_EQ(doc->Find("c")->kind, YamlNode::Kind::kNull);
  EXPECT_EQ(doc->Find("d")->kind, YamlNode::Kind::kNull);
}

TEST(YamlTree, ErrorsNameFileAndLine) {
  auto bad = ParseYaml("a: 1\nb: [1, 2\n", "cfg.yml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cfg.yml:"), std::string::npos) << bad.status().message();
  auto dup = ParseYaml("a: 1\na: 2\n", "cfg.yml");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("cfg.yml:2: duplicate key 'a'"), std::string::npos) << dup.status().message();
  // An alias bomb is refused, not expanded.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c)
    bomb += std::string(1, c) + ": &" + c + " [*" + char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + ", *" +
            char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) +
            ", *" + char(c - 1) + ", *" + char(c - 1) + "]\n";
  auto exploded = ParseYaml(bomb, "bomb.yml");
  ASSERT_FALSE(exploded.ok());
  EXPECT_NE(exploded.status().message().find("aliases"), std::string::npos) << exploded.status().message();
}

TEST(YamlTree, DeepNestingAndManyKeysAreBoundedWhileReading) {
  // Issue 41: the depth was checked only after libyaml had loaded the whole
  // document, and duplicate keys were found by a linear search (quadratic).
  auto deep = ParseYaml("a: " + std::string(500'000, '['), "deep.yml");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("deep.yml:1: nested too deeply"), std::string::npos) << deep.status().message();
  std::string many;
  for (int i = 0; i < 40'000; ++i) many += "k" + std::to_string(i) + ": 1\n";
  const auto t0 = std::chrono::steady_clock::now();
  auto wide = ParseYaml(many, "wide.yml");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(wide.ok()) << wide.status().message();
  EXPECT_EQ(wide->members.size(), 40'000u);
  EXPECT_LT(seconds, 5.0);  // a linear search per key took minutes; this takes tens of milliseconds
  auto big = ParseYaml(std::string(2 << 20, '#'), "big.yml");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("over 1 MiB"), std::string::npos);
}

TEST(WebConfig, ReadsExporterToolkitFormat) {
  const std::string path = WriteTemp("web.yml", std::string("basic_auth_users:\n  prometheus: ") + kS3cretHash +
                                                    "\nhttp_server_config:\n  http2: true\n  headers:\n    X-Frame-Options: deny\n");
  auto c = LoadWebConfig(path);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->tls());
  ASSERT_EQ(c->basic_auth_users.size(), 1u);
  EXPECT_EQ(c->headers.front().first, "X-Frame-Options");
}

TEST(WebConfig, RefusesWhatItCannotHonour) {
  const std::pair<const char*, const char*> cases[] = {
      {"tls_server_config:\n  cert_file: a.crt\n", ":1: tls_server_config needs both cert_file and key_file"},
      {"tls_server_config:\n  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n",
       ":2: tls_server_config.cipher_suites: 'TLS_RSA_WITH_RC4_128_SHA' is not a TLS 1.2 suite"},
      {"tls_server_config:\n  curve_preferences: [X25519]\n", ":2: tls_server_config.curve_preferences is not supported"},
      {"basic_auth_users:\n  alice: plaintext\n", ":2: basic_auth_users.alice must be a bcrypt hash"},
      {"basic_auth_user:\n  alice: x\n", ":1: unknown field basic_auth_user"},
      {"tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n", "cert_file"},
      {"- a\n- b\n", "the web config must be a mapping"},
      // exporter-toolkit's header list (web/handler.go) and its enumerated values.
      {"http_server_config:\n  headers:\n    Content-Type: text/html\n", ":3: header Content-Type cannot be configured"},
      {"http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "'allow' is not one of deny, sameorigin"},
  };
  for (const auto& [text, want] : cases) {
    auto c = LoadWebConfig(WriteTemp("bad.yml", text));
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("bad.yml"), std::string::npos) << c.status().message();
  }
}

// Issue 53: a reload keeps every guard the running config has unless the new
// file names the field that lowers it (a file cut after key_file turned an
// mTLS-only agent into an open one, and let TLS 1.2 back in).
TEST(WebConfig, AReloadLowersAGuardOnlyWhereTheFileSaysSo) {
  WebConfig running;
  running.path = "web.yml";
  running.cert_file = "a.crt";
  running.key_file = "a.key";
  running.client_ca_file = "ca.crt";
  running.client_auth_type = "RequireAndVerifyClientCert";
  running.min_version = "TLS13";
  running.headers = {{"X-Frame-Options", "deny"}};
  WebConfig cut = running;  // cut after key_file: every later field at its default
  cut.client_ca_file.clear();
  cut.client_auth_type = "NoClientCert";
  cut.min_version = "TLS12";
  cut.headers.clear();
  cut.fields_set = {"tls_server_config.cert_file", "tls_server_config.key_file"};
  EXPECT_NE(ReloadLowersAGuard(running, &cut).find("client_auth_type"), std::string::npos);
  cut.fields_set.push_back("tls_server_config.client_auth_type");  // said: NoClientCert
  EXPECT_NE(ReloadLowersAGuard(running, &cut).find("min_version, which would let TLS12 in"), std::string::npos);
  cut.fields_set.push_back("tls_server_config.min_version");
  EXPECT_NE(ReloadLowersAGuard(running, &cut).find("X-Frame-Options"), std::string::npos);
  cut.fields_set.push_back("http_server_config.headers");
  EXPECT_EQ(ReloadLowersAGuard(running, &cut), "");
  EXPECT_NE(ReloadLowersAGuard(running, nullptr).find("turn TLS off"), std::string::npos);
  // Raising a guard, or keeping it, needs nothing said.
  WebConfig stricter = running;
  stricter.fields_set.clear();
  EXPECT_EQ(ReloadLowersAGuard(cut, &stricter), "");
  // Through the file reader: what the file sets is what it names.
  const std::string text = "tls_server_config:\n  cert_file: /dev/null\n  key_file: /dev/null\n";
  auto loaded = LoadWebConfig(WriteTemp("cut.yml", text));
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_NE(ReloadLowersAGuard(running, &*loaded), "");
  auto said = LoadWebConfig(WriteTemp("said.yml", text + "  client_auth_type: NoClientCert\n  min_version: TLS12\n"
                                                         "http_server_config:\n  headers: {}\n"));
  ASSERT_TRUE(said.ok()) << said.status().message();
  EXPECT_EQ(ReloadLowersAGuard(running, &*said), "");
}

TEST(WebConfig, CipherSuitesInGosNames) {
  auto c = LoadWebConfig(WriteTemp("suites.yml", "tls_server_config:\n  cert_file: /dev/null\n  key_file: /dev/null\n"
                                                 "  cipher_suites:\n    - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\n"
                                                 "    - TLS_AES_128_GCM_SHA256\n"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->cipher_suites, std::vector<std::string>{"ECDHE-RSA-AES256-GCM-SHA384"});
}

/// RFC 4648 base64, for building Authorization headers in tests.
std::string Base64(const std::string& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

// Issue 53: at 1,024 remembered wrong passwords the whole memory was cleared,
// so every known-wrong guess became unknown at once, and one the event loop had
// just sent to the fast lane as known could cost a bcrypt there. Now the oldest
// answer gives way, one at a time: the recent ones stay known.
TEST(BasicAuth, AFloodOfNewGuessesForgetsTheOldestAnswerNotAll) {
  BasicAuthVerifier auth(std::vector<std::pair<std::string, std::string>>{{"prometheus", kS3cretHash}});
  ASSERT_EQ(Base64("prometheus:s3cret"), "cHJvbWV0aGV1czpzM2NyZXQ=");
  const auto basic = [](const std::string& user_password) { return "Basic " + Base64(user_password); };
  EXPECT_TRUE(auth.Verify(basic("prometheus:s3cret")));
  for (int i = 0; i < 1024; ++i) EXPECT_FALSE(auth.Verify(basic("prometheus:guess-" + std::to_string(i))));
  const std::string recent = basic("prometheus:guess-1023");
  EXPECT_EQ(auth.Known(basic("prometheus:guess-0")), BasicAuthVerifier::Answer::kDenied);  // the limit, not past it
  EXPECT_FALSE(auth.Verify(basic("prometheus:guess-1024")));  // one past the limit
  EXPECT_EQ(auth.Known(basic("prometheus:guess-0")), BasicAuthVerifier::Answer::kUnknown);  // the oldest went
  EXPECT_EQ(auth.Known(basic("prometheus:guess-1")), BasicAuthVerifier::Answer::kDenied);
  EXPECT_EQ(auth.Known(recent), BasicAuthVerifier::Answer::kDenied);
  EXPECT_EQ(auth.Known(basic("prometheus:s3cret")), BasicAuthVerifier::Answer::kAllowed);  // a memory of its own
}

TEST(BasicAuth, ChecksBcryptAndRemembersBothAnswers) {
  BasicAuthVerifier auth(std::vector<std::pair<std::string, std::string>>{{"prometheus", kS3cretHash}});
  ASSERT_TRUE(auth.enabled());
  // "prometheus:s3cret", "prometheus:wrong", "nobody:s3cret"
  EXPECT_EQ(auth.Known("Basic cHJvbWV0aGV1czpzM2NyZXQ="), BasicAuthVerifier::Answer::kUnknown);
  EXPECT_EQ(auth.Known("Bearer x"), BasicAuthVerifier::Answer::kDenied);  // not Basic: no bcrypt needed
  EXPECT_TRUE(auth.Verify("Basic cHJvbWV0aGV1czpzM2NyZXQ="));
  EXPECT_EQ(auth.Known("Basic cHJvbWV0aGV1czpzM2NyZXQ="), BasicAuthVerifier::Answer::kAllowed);
  EXPECT_TRUE(auth.Verify("Basic cHJvbWV0aGV1czpzM2NyZXQ="));  // from the cache
  EXPECT_FALSE(auth.Verify("Basic cHJvbWV0aGV1czp3cm9uZw=="));
  // A repeated wrong guess is refused from memory, without another bcrypt.
  EXPECT_EQ(auth.Known("Basic cHJvbWV0aGV1czp3cm9uZw=="), BasicAuthVerifier::Answer::kDenied);
  EXPECT_FALSE(auth.Verify("Basic bm9ib2R5OnMzY3JldA=="));
  EXPECT_FALSE(auth.Verify(""));
  EXPECT_FALSE(auth.Verify("Bearer cHJvbWV0aGV1czpzM2NyZXQ="));
  EXPECT_FALSE(auth.Verify("Basic !!!"));
  // The scheme is case-insensitive (RFC 9110); a password with a NUL is not
  // the password before it (crypt() stops at the NUL).
  EXPECT_TRUE(auth.Verify("basic cHJvbWV0aGV1czpzM2NyZXQ="));
  EXPECT_TRUE(auth.Verify("BASIC cHJvbWV0aGV1czpzM2NyZXQ="));
  EXPECT_FALSE(auth.Verify("Basic cHJvbWV0aGV1czpzM2NyZXQAYW55dGhpbmc="));
  EXPECT_FALSE(auth.Verify("Basicx cHJvbWV0aGV1czpzM2NyZXQ="));
  BasicAuthVerifier open(std::vector<std::pair<std::string, std::string>>{});
  EXPECT_TRUE(open.Verify(""));  // no users: open
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

TEST(JobIdentity, KubeletNamesComeFirst) {
  JobIdentity id;
  id.pod_uid = "1b2c3d4e-0000-1111-2222-333344445555";
  id.container_id = "abcdef012345";
  id.namespace_name = "team-a";
  id.pod_name = "trainer-0";
  id.container_name = "main";
  EXPECT_EQ(id.Key(), "pod:team-a/trainer-0/main");
  const Labels labels = id.ToLabels();
  auto value = [&](const std::string& name) {
    for (const auto& [k, v] : labels)
      if (k == name) return v;
    return std::string("(absent)");
  };
  EXPECT_EQ(value("namespace"), "team-a");
  EXPECT_EQ(value("pod"), "trainer-0");
  EXPECT_EQ(value("container"), "main");
  EXPECT_EQ(value("pod_uid"), id.pod_uid);
  EXPECT_EQ(value("job_name"), "pod team-a/trainer-0/main");
  // Allocated, with no process seen: still a job.
  JobIdentity held;
  held.namespace_name = "team-b";
  held.pod_name = "held-idle";
  EXPECT_FALSE(held.empty());
  EXPECT_EQ(held.Key(), "pod:team-b/held-idle/");
}

}  // namespace
}  // namespace gputriage
