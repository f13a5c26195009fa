//! The clap arguments of `bloatlab test`'s measurement options, built from
//! the model's one table ([`TEST_OPTIONS`]): the same arguments serve
//! `bloatlab test`, the options after `bloatlab lab --` and `bloatlab sweep
//! --`, the shell completions and the man pages.
use bloatlab_model::options::{Arity, Shape};
use bloatlab_model::{TestOption, TestOverrides, TEST_OPTIONS};
use clap::builder::{PossibleValuesParser, ValueParser};
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches, ValueHint};

/// The measurement options given on a command line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadArgs(pub TestOverrides);

/// The clap argument of one option: its value is checked (and spelled
/// canonically) by the model's parser, so clap reports a bad value with the
/// model's message.
fn arg(o: &'static TestOption) -> Arg {
    let mut a = Arg::new(o.long).long(o.long).help(o.help).value_name(o.value_name);
    if let Some(c) = o.short {
        a = a.short(c);
    }
    if let Some(r) = o.requires {
        a = a.requires(r);
    }
    let check = ValueParser::new(move |s: &str| o.canonical(s));
    a = match o.arity {
        Arity::Switch => a.action(ArgAction::SetTrue).value_name(None::<&str>),
        Arity::Value => a.action(ArgAction::Set).value_parser(check),
        Arity::OptionalValue { missing } => {
            a.action(ArgAction::Set).num_args(0..=1).require_equals(true).default_missing_value(missing).value_parser(check)
        }
        Arity::Repeated => a.action(ArgAction::Append).value_parser(check),
    };
    if !o.choices.is_empty() && o.arity != Arity::Switch {
        a = a.value_parser(PossibleValuesParser::new(o.choices));
    }
    match (o.arity, o.shape) {
        (Arity::Switch, _) => a,
        (_, Shape::Host) => a.value_hint(ValueHint::Hostname),
        _ => a.value_hint(ValueHint::Other),
    }
}

impl Args for LoadArgs {
    fn augment_args(mut cmd: Command) -> Command {
        for o in TEST_OPTIONS {
            cmd = cmd.arg(arg(o));
        }
        cmd
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for LoadArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut o = TestOverrides::default();
        let set = |o: &mut TestOverrides, opt: &TestOption, v: &str| {
            o.set(opt.long, v).map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, e))
        };
        for opt in TEST_OPTIONS {
            match opt.arity {
                Arity::Switch => {
                    if m.get_flag(opt.long) {
                        set(&mut o, opt, "on")?;
                    }
                }
                _ => {
                    for v in m.get_many::<String>(opt.long).into_iter().flatten() {
                        set(&mut o, opt, v)?;
                    }
                }
            }
        }
        Ok(LoadArgs(o))
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
    use bloatlab_model::{LabConfig, TestConfig};
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
