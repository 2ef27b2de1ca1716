// The app layer's tables and parsers without a window: --set settings, the command registry (every
// command once, unique verbs and shortcuts), --action parsing and the command line's values.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "app/actions.h"
#include "app/commands.h"
#include "app/options.h"
#include "app/set_option.h"
#include "sparge/core/error.h"

using namespace sparge;
using namespace sparge::gui;

TEST(Settings, ApplySettingParsesAndRejects) {
  core::RunConfig c;
  Budget b;
  applySetting("theta=0.5", c, b);
  applySetting("tau=0.9", c, b);
  applySetting("lambda=20", c, b);
  applySetting("geometry=64x128", c, b);
  applySetting("sink=1", c, b);
  applySetting("l1=0.03", c, b);
  EXPECT_EQ(c.defaults.theta, 0.5);
  EXPECT_EQ(c.defaults.tau, 0.9);
  EXPECT_EQ(c.defaults.lambda, 20);
  EXPECT_EQ(c.geometry, core::kGeometry64x128);
  EXPECT_TRUE(c.sink);
  EXPECT_EQ(b.l1, 0.03);
  applySetting("topk=0.25", c, b);
  EXPECT_EQ(c.defaults.mode, core::SelectMode::TopK);
  EXPECT_THROW(applySetting("tau=2", c, b), sparge::Error);
  EXPECT_THROW(applySetting("bogus=1", c, b), sparge::Error);
  EXPECT_THROW(applySetting("theta=abc", c, b), sparge::Error);
  EXPECT_THROW(applySetting("theta", c, b), sparge::Error);
}

TEST(Settings, TargetSetsTilesAndNumericsAndQuantOverrides) {
  core::RunConfig c;
  Budget b;
  applySetting("target=sm90", c, b);
  EXPECT_EQ(c.geometry, core::kGeometry64x128);
  EXPECT_EQ(c.numerics, core::Numerics::Int8Fp8);
  applySetting("target=sm80", c, b);
  EXPECT_EQ(c.geometry, core::kGeometry128x64);
  EXPECT_EQ(c.numerics, core::Numerics::Int8Fp16);
  applySetting("quant=none", c, b);
  EXPECT_EQ(c.numerics, core::Numerics::None);
  EXPECT_EQ(c.geometry, core::kGeometry128x64);
  EXPECT_THROW(applySetting("quant=int4", c, b), sparge::Error);
  EXPECT_THROW(applySetting("target=sm75", c, b), sparge::Error);
  core::RunConfig d = defaultAppConfig();
  EXPECT_EQ(d.geometry, core::kGeometry128x64);
  EXPECT_EQ(d.numerics, core::Numerics::Int8Fp8);
}

TEST(Commands, EveryCommandOnceWithUniqueVerbsAndShortcuts) {
  std::set<int> ids;
  std::set<std::string> verbs, keys;
  for (const CommandInfo& c : commands()) {
    EXPECT_TRUE(ids.insert(static_cast<int>(c.id)).second) << c.label;
    EXPECT_EQ(&command(c.id), &c);
    if (c.verb) {
      EXPECT_TRUE(verbs.insert(c.verb).second) << c.verb;
      EXPECT_EQ(commandForVerb(c.verb), &c);
      EXPECT_NE(c.arg, ActionArg::NotAnAction) << c.verb;
      EXPECT_NE(actionHelp().find(c.verb), std::string::npos) << c.verb;
    }
    for (const Shortcut& k : c.keys) {
      if (k.key) {
        EXPECT_TRUE(keys.insert(k.label()).second) << k.label();
      }
    }
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(CommandId::About) + 1);
  EXPECT_EQ(command(CommandId::TuneEntry).keys[0].label(), "Ctrl+Shift+T");
}

TEST(Commands, ActionsParseAndRejectBadArguments) {
  EXPECT_EQ(parseAction("tune=entry").command->id, CommandId::TuneHead);
  EXPECT_EQ(parseAction("view=overview").arg, "overview");
  EXPECT_EQ(parseAction("view=kernels:centre-bottom").arg, "kernels:centre-bottom");
  EXPECT_THROW(parseAction("view=kernels:upstairs"), sparge::Error);
  EXPECT_EQ(parseAction("sweep=all").command->id, CommandId::SweepHead);
  EXPECT_EQ(parseAction("preset=filter-off").command->id, CommandId::PresetCdf);
  EXPECT_EQ(parseAction("profile").arg, "");
  EXPECT_THROW(parseAction("tune=layer"), sparge::Error);
  EXPECT_THROW(parseAction("view=nowhere"), sparge::Error);
  EXPECT_THROW(parseAction("sweep=some"), sparge::Error);
  EXPECT_THROW(parseAction("preset=mine"), sparge::Error);
  EXPECT_THROW(parseAction("export-report=r.txt"), sparge::Error);
  EXPECT_THROW(parseAction("profile=0"), sparge::Error);
  EXPECT_EQ(parseAction("profile=3,200").arg, "3,200");
  EXPECT_EQ(parseAction("profile=3,0").arg, "3,0");
  EXPECT_THROW(parseAction("profile=3,-1"), sparge::Error);
  EXPECT_THROW(parseAction("profile=3,20000"), sparge::Error);
  EXPECT_THROW(parseAction("profile=3,x"), sparge::Error);
  EXPECT_THROW(parseAction("profile=,200"), sparge::Error);
  EXPECT_THROW(parseAction("profile=3,200,1"), sparge::Error);
  EXPECT_THROW(parseAction("set=bogus=1"), sparge::Error);
  EXPECT_THROW(parseAction("dance"), sparge::Error);
}

namespace {
AppOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "sparge-studio");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return parseOptions(int(argv.size()), argv.data());
}
}  // namespace

TEST(Options, CommandLineValuesFollowTheClisRules) {
  EXPECT_EQ(parse({"c.h5", "--font-scale", "1.5", "--threads", "3", "--size", "800x600"}).fontScale, 1.5f);
  for (std::vector<std::string> bad : {std::vector<std::string>{"--font-scale", "nan"},
                                       {"--font-scale", "inf"},
                                       {"--font-scale", "0"},
                                       {"--threads", "-1"},
                                       {"--threads", ""},
                                       {"--size", "4294967616x1000"},
                                       {"--frames", "4294967297"},
                                       {"--timeout", "nan"},
                                       {"--head", "-1"},
                                       {"--mouse", "1,nan"},
                                       {""},
                                       {"--entry", ""},
                                       {"--screenshot", "shot.txt"},
                                       {"--bogus", "1"}}) {
    EXPECT_THROW(parse(bad), sparge::Error) << bad[0];
  }
  core::RunConfig c;
  Budget b;
  EXPECT_THROW(applySetting("l1=inf", c, b), sparge::Error);
  EXPECT_THROW(applySetting("theta= 0.5", c, b), sparge::Error);
}

TEST(Options, ExportTargetsAreCheckedWhenParsed) {
  EXPECT_THROW(parseAction("export-report=missing/r.json"), sparge::Error);
  EXPECT_THROW(parseAction("export-masks=" + std::string(300, 'm') + ".h5"), sparge::Error);
  EXPECT_THROW(parseAction("export-params="), sparge::Error);
  EXPECT_EQ(parseAction("export-report=R.CSV").arg, "R.CSV");
}
