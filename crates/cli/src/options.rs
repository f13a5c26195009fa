//! The clap arguments of the options defined in the model's tables
//! ([`TEST_OPTIONS`](bloatlab_model::TEST_OPTIONS) for `bloatlab test`,
//! [`LAB_OPTIONS`](bloatlab_model::LAB_OPTIONS) for `bloatlab lab`): the same
//! arguments serve `bloatlab test`, `bloatlab lab`, the options after
//! `bloatlab lab --` and `bloatlab sweep --`, the shell completions and the
//! man pages.
use bloatlab_model::options::{Arity, Shape};
use bloatlab_model::{Configurable, LabConfig, MonitorConfig, OptionDef, Overrides, TestConfig};
use clap::builder::{PossibleValuesParser, ValueParser};
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches, ValueHint};

/// The options of `T` given on a command line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OptionArgs<T: Configurable>(pub Overrides<T>);

/// `bloatlab test`'s measurement options.
pub type LoadArgs = OptionArgs<TestConfig>;

/// The clap argument of one option: its value is checked (and spelled
/// canonically) by the model's parser, so clap reports a bad value with the
/// model's message.
fn arg<T: Configurable>(o: &'static OptionDef<T>) -> Arg {
    let mut a = Arg::new(o.long).long(o.long).help(o.help()).value_name(o.value_name);
    if let Some(c) = o.short {
        a = a.short(c);
    }
    if let Some(r) = o.requires {
        a = a.requires(r);
    }
    let check = ValueParser::new(move |s: &str| o.canonical(s));
    a = match o.arity {
        Arity::Switch => a.action(ArgAction::SetTrue).value_name(None::<&str>),
        // a comma list, each value with its own key=value parameters
        // (`--queue fifo:10,fq_codel:quantum=300,flows=64` is two queues)
        Arity::Value if o.one_run_each => a.action(ArgAction::Append).value_parser(ValueParser::new(move |s: &str| {
            bloatlab_model::options::split_values(s).iter().map(|v| o.canonical(v)).collect::<Result<Vec<String>, String>>()
        })),
        Arity::Value => a.action(ArgAction::Set).value_parser(check),
        Arity::OptionalValue { missing } => {
            a.action(ArgAction::Set).num_args(0..=1).require_equals(true).default_missing_value(missing).value_parser(check)
        }
        Arity::Repeated => a.action(ArgAction::Append).value_parser(check),
    };
    if !o.choices.is_empty() && o.arity != Arity::Switch {
        a = a.value_parser(PossibleValuesParser::new(o.choices));
    }
    // A value that starts with '-' (`--delay -20ms`) goes to the model's
    // parser, which says what is wrong with it; clap would call it an
    // unknown flag and suggest `-- -20ms`, which means something else to
    // `lab` (the test's options).
    if o.arity != Arity::Switch {
        a = a.allow_hyphen_values(true);
    }
    match (o.arity, o.shape) {
        (Arity::Switch, _) => a,
        (_, Shape::Host) => a.value_hint(ValueHint::Hostname),
        (_, Shape::File) => a.value_hint(ValueHint::FilePath),
        _ => a.value_hint(ValueHint::Other),
    }
}

/// The clap arguments of the options of `T` that `keep` selects.
fn augment<T: Configurable>(mut cmd: Command, keep: fn(&str) -> bool) -> Command {
    for o in T::options().iter().filter(|o| keep(o.long)) {
        cmd = cmd.arg(arg(o));
    }
    cmd
}

/// The options of `T` that `keep` selects, as given on a command line.
fn overrides<T: Configurable>(m: &ArgMatches, keep: fn(&str) -> bool) -> Result<Overrides<T>, clap::Error> {
    let mut o = Overrides::<T>::default();
    let err = |e: String| clap::Error::raw(clap::error::ErrorKind::ValueValidation, e);
    for opt in T::options().iter().filter(|o| keep(o.long)) {
        match opt.arity {
            Arity::Switch => {
                if m.get_flag(opt.long) {
                    o.set(opt.long, "on").map_err(err)?;
                }
            }
            _ if opt.one_run_each => {
                for v in m.get_many::<Vec<String>>(opt.long).into_iter().flatten().flatten() {
                    o.add(opt.long, v).map_err(err)?;
                }
            }
            _ => {
                for v in m.get_many::<String>(opt.long).into_iter().flatten() {
                    o.set(opt.long, v).map_err(err)?;
                }
            }
        }
    }
    Ok(o)
}

fn all(_: &str) -> bool {
    true
}

impl<T: Configurable> Args for OptionArgs<T> {
    fn augment_args(cmd: Command) -> Command {
        augment::<T>(cmd, all)
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<T: Configurable> FromArgMatches for OptionArgs<T> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        overrides(m, all).map(OptionArgs)
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// The lab options that describe the link itself, the ones `bloatlab
/// emulate` takes by hand from the same definitions (help, parsing,
/// completion) as `bloatlab lab`.
pub const LINK_OPTIONS: &[&str] =
    &["rate", "rate-up", "rate-down", "queue", "queue-up", "queue-down", "delay", "jitter", "loss", "trace-up", "trace-down"];

fn link(long: &str) -> bool {
    LINK_OPTIONS.contains(&long)
}

/// [`LINK_OPTIONS`] given on a command line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkOptionArgs(pub Overrides<LabConfig>);

impl Args for LinkOptionArgs {
    fn augment_args(cmd: Command) -> Command {
        augment::<LabConfig>(cmd, link)
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for LinkOptionArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        overrides(m, link).map(LinkOptionArgs)
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// The `bloatlab tune` options `bloatlab lab --tune` takes (the lab names
/// the interfaces, the server and the files itself), from the same
/// definitions as `bloatlab tune`'s.
pub const LAB_TUNE_OPTIONS: &[&str] = &["target-added", "budget", "budget-bytes", "step", "sqm", "overhead", "mpu", "write-config", "report"];

fn lab_tune(long: &str) -> bool {
    LAB_TUNE_OPTIONS.contains(&long)
}

/// [`LAB_TUNE_OPTIONS`] given on a command line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabTuneArgs(pub Overrides<bloatlab_model::TuneConfig>);

impl Args for LabTuneArgs {
    fn augment_args(cmd: Command) -> Command {
        augment::<bloatlab_model::TuneConfig>(cmd, lab_tune)
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for LabTuneArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        overrides(m, lab_tune).map(LabTuneArgs)
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// `bloatlab history`'s `--db`: the monitor's option, from the same definition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MonitorDbArgs(pub Overrides<MonitorConfig>);

fn monitor_db(long: &str) -> bool {
    long == "db"
}

impl Args for MonitorDbArgs {
    fn augment_args(cmd: Command) -> Command {
        // the monitor's definition; history opens a database, never creates one
        augment::<MonitorConfig>(cmd, monitor_db).mut_arg("db", |a| {
            a.help(format!(
                "The monitor's database to read: a SQLite file or a PostgreSQL database, postgres://USER[:PASSWORD]@HOST[:PORT]/DB (opened, never created: a missing one is refused) [default: {}]",
                bloatlab_model::DEFAULT_MONITOR_DB
            ))
        })
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for MonitorDbArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        overrides(m, monitor_db).map(MonitorDbArgs)
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! Every measurement option of `bloatlab test`, walked through every
    //! front end to the configuration the engine runs: `bloatlab test`,
    //! `bloatlab lab -- ...`, `bloatlab sweep --set`, `bloatlab sweep -- ...`
    //! and a recipe file. An option added to the model's table is checked
    //! here without a line of this test changing.
    use super::*;
    use crate::{Cli, Cmd};
    use bloatlab_model::{LabConfig, TestConfig, TestOverrides, TEST_OPTIONS};
    use bloatlab_recipes::{params, recipe::Recipe, runner};
    use clap::Parser;

    /// The lab's hosts, as a built lab would give their addresses.
    fn lab_config(cfg: &LabConfig, user: &TestOverrides) -> TestConfig {
        bloatlab_lab::check_test_options(cfg, user).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The test config of a recipe's first point.
    fn recipe_config(r: &Recipe) -> TestConfig {
        let p = &runner::plan(r, false, 0)[0];
        let pt = params::lab_point(&runner::point_values(r, p)).unwrap();
        lab_config(&pt.lab, &pt.test)
    }

    fn cli(args: &[String]) -> Cli {
        Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_option_reaches_the_engine_through_every_front_end() {
        for o in TEST_OPTIONS {
            for &e in o.examples {
                let want = vec![e.to_string()];
                // an option that needs another gets that one's example first
                let pre = o.requires.map(|r| bloatlab_model::test_option(r).unwrap());
                let pre_args = pre.map(|p| p.args(p.examples[0])).unwrap_or_default();
                let pre_setting = pre.map(|p| (p.param_name(), p.examples[0].replace(',', "+")));
                let args = [pre_args.clone(), o.args(e)].concat();
                // a sweep or recipe value: `+` for a list's commas
                let swept = e.replace(',', "+");

                // bloatlab test HOST --option value
                let Cmd::Test(t) = cli(&[strings(&["bloatlab", "test", "h"]), args.clone()].concat()).cmd else { unreachable!() };
                assert_eq!(o.get(&t.config().unwrap()), want, "test {args:?}");

                // bloatlab lab -- --option value
                let Cmd::Lab(l) = cli(&[strings(&["bloatlab", "lab", "--"]), args.clone()].concat()).cmd else { unreachable!() };
                let run = crate::cmd::lab::resolve(&l.run).unwrap();
                assert_eq!(o.get(&lab_config(&run.cfg, &run.run.test)), want, "lab -- {args:?}");

                // bloatlab sweep --set option=value (and a swept queue)
                let set = format!("{}={swept}", o.param_name());
                let mut sweep = strings(&["bloatlab", "sweep", "--set", &set, "--set", "queue=10,100"]);
                if let Some((k, v)) = &pre_setting {
                    sweep.extend(strings(&["--set", &format!("{k}={v}")]));
                }
                let Cmd::Sweep(s) = cli(&sweep).cmd else { unreachable!() };
                let r = bloatlab_recipes::sweep::sweep_recipe(&crate::cmd::sweep::sweep_request(s).unwrap()).unwrap();
                assert_eq!(o.get(&recipe_config(&r)), want, "sweep --set {set}");

                // bloatlab sweep --set queue=... -- --option value
                let Cmd::Sweep(s) = cli(&[strings(&["bloatlab", "sweep", "--set", "queue=10,100", "--"]), args.clone()].concat()).cmd else { unreachable!() };
                let r = bloatlab_recipes::sweep::sweep_recipe(&crate::cmd::sweep::sweep_request(s).unwrap()).unwrap();
                assert_eq!(o.get(&recipe_config(&r)), want, "sweep -- {args:?}");
                // ... whose written recipe file carries it too
                let again = Recipe::parse(&r.source, "written", false).unwrap();
                assert_eq!(o.get(&recipe_config(&again)), want, "the recipe a sweep writes, {args:?}");

                // a recipe file
                let pre_line = pre_setting.map(|(k, v)| format!("{k} = \"{v}\"\n")).unwrap_or_default();
                let text = format!("name = \"x\"\nkind = \"lab\"\n[settings]\n{pre_line}{} = \"{swept}\"\n[grid]\nqueue = [10, 100]\n", o.param_name());
                let r = Recipe::parse(&text, "x.toml", false).unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(o.get(&recipe_config(&r)), want, "recipe {text}");
            }
        }
    }

    /// Every link option of `bloatlab lab`, walked through `bloatlab lab`,
    /// `bloatlab sweep --set` and a recipe file to the lab configuration a
    /// lab is built with.
    #[test]
    fn every_lab_option_reaches_the_lab_through_every_front_end() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("link.trace");
        std::fs::write(&trace, "1\n2\n3\n4\n").unwrap();
        let trace = trace.to_str().unwrap().to_string();
        for o in bloatlab_model::LAB_OPTIONS {
            for &e in o.examples {
                // a trace must exist: the lab reads it when it checks the configuration
                let e = if o.shape == Shape::File { trace.as_str() } else { e };
                let want = vec![e.to_string()];
                let pre = o.requires.map(|r| bloatlab_model::lab_option(r).unwrap());
                let pre_args = pre.map(|p| p.args(p.examples[0])).unwrap_or_default();
                let pre_setting = pre.map(|p| (p.param_name(), p.examples[0].to_string()));
                let args = [pre_args, o.args(e)].concat();

                // bloatlab lab --option value
                let Cmd::Lab(l) = cli(&[strings(&["bloatlab", "lab"]), args.clone()].concat()).cmd else { unreachable!() };
                let run = crate::cmd::lab::resolve(&l.run).unwrap_or_else(|e| panic!("lab {args:?}: {e:#}"));
                assert_eq!(o.get(&run.cfg), want, "lab {args:?}");

                // bloatlab sweep --set option=value (the sweep's axis: the test's duration)
                let mut sweep = strings(&["bloatlab", "sweep", "--set", &format!("{}={e}", o.param_name()), "--set", "duration=5s,6s"]);
                if let Some((k, v)) = &pre_setting {
                    sweep.extend(strings(&["--set", &format!("{k}={v}")]));
                }
                let Cmd::Sweep(s) = cli(&sweep).cmd else { unreachable!() };
                let r = bloatlab_recipes::sweep::sweep_recipe(&crate::cmd::sweep::sweep_request(s).unwrap()).unwrap();
                assert_eq!(o.get(&recipe_lab(&r)), want, "sweep {sweep:?}");
                let again = Recipe::parse(&r.source, "written", false).unwrap();
                assert_eq!(o.get(&recipe_lab(&again)), want, "the recipe a sweep writes, {sweep:?}");

                // a recipe file
                let pre_line = pre_setting.map(|(k, v)| format!("{k} = \"{v}\"\n")).unwrap_or_default();
                let text = format!("name = \"x\"\nkind = \"lab\"\n[settings]\n{pre_line}{} = \"{e}\"\n[grid]\nduration = [\"5s\", \"6s\"]\n", o.param_name());
                let r = Recipe::parse(&text, "x.toml", false).unwrap_or_else(|err| panic!("{text}: {err}"));
                assert_eq!(o.get(&recipe_lab(&r)), want, "recipe {text}");
            }
        }
    }

    /// The lab configuration of a recipe's first point, checked as a lab checks it.
    fn recipe_lab(r: &Recipe) -> LabConfig {
        let p = &runner::plan(r, false, 0)[0];
        let pt = params::lab_point(&runner::point_values(r, p)).unwrap();
        bloatlab_lab::validate(&pt.lab).unwrap_or_else(|e| panic!("{e:#}"));
        pt.lab
    }

    #[test]
    fn a_repeated_option_keeps_every_occurrence_everywhere() {
        let want = strings(&["192.0.2.1", "192.0.2.7"]);
        let o = bloatlab_model::test_option("ping").unwrap();
        let Cmd::Test(t) = cli(&strings(&["bloatlab", "test", "h", "--ping", "192.0.2.1", "--ping", "192.0.2.7"])).cmd else { unreachable!() };
        assert_eq!(o.get(&t.config().unwrap()), want);
        let Cmd::Sweep(s) = cli(&strings(&["bloatlab", "sweep", "--set", "ping=192.0.2.1+192.0.2.7,192.0.2.1"])).cmd else { unreachable!() };
        let r = bloatlab_recipes::sweep::sweep_recipe(&crate::cmd::sweep::sweep_request(s).unwrap()).unwrap();
        assert_eq!(o.get(&recipe_config(&r)), want);
        // a lab role becomes that host's address
        let Cmd::Lab(l) = cli(&strings(&["bloatlab", "lab", "--", "--ping", "router", "--witness", "server"])).cmd else { unreachable!() };
        let run = crate::cmd::lab::resolve(&l.run).unwrap();
        let t = lab_config(&run.cfg, &run.run.test);
        assert_eq!(o.get(&t), strings(&["192.0.2.2"]));
        assert_eq!(t.witness.as_deref(), Some("192.0.2.3:9770"));
        let Cmd::Lab(l) = cli(&strings(&["bloatlab", "lab", "--", "--witness", "router"])).cmd else { unreachable!() };
        assert!(format!("{:#}", crate::cmd::lab::resolve(&l.run).unwrap_err()).contains("no bloatlab server runs on the lab's router"));
    }

    #[test]
    fn bad_values_are_refused_with_the_models_message_everywhere() {
        let e = Cli::try_parse_from(["bloatlab", "test", "h", "--rpm=sideways"]).err().unwrap().to_string();
        assert!(e.contains("not an RPM stage"), "{e}");
        let e = Cli::try_parse_from(["bloatlab", "lab", "--", "--scenarios", "9u"]).map(|c| match c.cmd {
            Cmd::Lab(l) => crate::cmd::lab::resolve(&l.run).map(|_| ()),
            _ => unreachable!(),
        });
        let e = match e {
            Err(e) => e.to_string(),
            Ok(r) => format!("{:#}", r.unwrap_err()),
        };
        assert!(e.contains("or auto"), "{e}");
        let Cmd::Sweep(s) = cli(&strings(&["bloatlab", "sweep", "--set", "rpm=sideways"])).cmd else { unreachable!() };
        let e = format!("{:#}", bloatlab_recipes::sweep::sweep_recipe(&crate::cmd::sweep::sweep_request(s).unwrap()).unwrap_err());
        assert!(e.contains("not an RPM stage"), "{e}");
        let Cmd::Sweep(s) = cli(&strings(&["bloatlab", "sweep", "--set", "udp_size=200", "--set", "queue=10,100"])).cmd else { unreachable!() };
        let r = bloatlab_recipes::sweep::sweep_recipe(&crate::cmd::sweep::sweep_request(s).unwrap()).unwrap();
        let p = &runner::plan(&r, false, 0)[0];
        let pt = params::lab_point(&runner::point_values(&r, p)).unwrap();
        assert!(format!("{:#}", bloatlab_lab::check_test_options(&pt.lab, &pt.test).unwrap_err()).contains("--udp-size needs --udp"));
    }
}
