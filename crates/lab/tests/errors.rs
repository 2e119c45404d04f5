//! Scenario errors carry their kind and a message that names the key.
//! (No namespaces: nothing here runs the lab.)

use std::io::ErrorKind;
use tcpwhy_lab::scenario::{load, source};
use tcpwhy_lab::Error;

fn rwnd() -> (String, String) {
    source("rwnd-rmem").unwrap()
}

#[test]
fn unreadable_scenario_file_has_its_path_and_io_error() {
    let e = source("/nonexistent/my.toml").unwrap_err();
    match &e {
        Error::Unreadable { path, source } => {
            assert_eq!(path.to_str(), Some("/nonexistent/my.toml"));
            assert_eq!(source.kind(), ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
    assert!(!e.is_invalid_scenario());
    assert!(e.to_string().starts_with("cannot read scenario file /nonexistent/my.toml: "), "{e}");
}

#[test]
fn unknown_scenario_lists_the_builtin_ones() {
    let e = source("no-such-scenario").unwrap_err();
    assert!(matches!(&e, Error::UnknownScenario { name, builtin } if name == "no-such-scenario" && builtin.contains(&"rwnd-rmem")));
    assert!(e.is_invalid_scenario());
    assert!(e.to_string().starts_with("unknown scenario \"no-such-scenario\"; built-in ones: "), "{e}");
    assert!(e.to_string().ends_with(" (or give a path to a .toml file)"), "{e}");
}

#[test]
fn bad_values_name_the_field_and_the_value() {
    let (origin, text) = rwnd();
    let e = load(&origin, &text, &["link.down.loss=2".into()]).unwrap_err();
    assert!(
        matches!(&e, Error::Value { field, value: Some(v), .. } if field == "link.down.loss" && v == "2"),
        "{e:?}"
    );
    assert!(e.is_invalid_scenario());
    assert_eq!(e.to_string(), "link.down.loss = 2: a probability must be between 0 and 1");
    let e = load(&origin, &text, &["server.tcp_wmem=4096 1 2".into()]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "server.tcp_wmem = \"4096 1 2\": three sizes \"min default max\" with min <= default <= max"
    );
}

#[test]
fn parse_errors_name_the_key_or_the_line() {
    let (origin, text) = rwnd();
    let e = load(&origin, &text, &["link.rtt=fast".into()]).unwrap_err();
    assert!(matches!(&e, Error::Key { key, .. } if key == "link.rtt"), "{e:?}");
    assert!(e.to_string().starts_with("built-in scenario rwnd-rmem: link.rtt: "), "{e}");
    let e = load("my.toml", "name = \n", &[]).unwrap_err();
    assert!(matches!(&e, Error::Toml { origin, .. } if origin == "my.toml"), "{e:?}");
    assert!(e.to_string().contains("line 1"), "{e}");
    let e = load(&origin, &text, &["link.rtt".into()]).unwrap_err();
    assert!(matches!(&e, Error::Set { set, .. } if set == "link.rtt"), "{e:?}");
    assert_eq!(e.to_string(), "--set \"link.rtt\": expected key=value, e.g. link.rtt=40ms");
}

#[test]
fn invalid_traffic_is_the_traffic_crates_error() {
    let (origin, text) = rwnd();
    let sc = load(&origin, &text, &["traffic.write_size=0".into()]).unwrap();
    let e = tcpwhy_lab::run::traffic_spec(&sc).unwrap_err();
    let Error::Traffic(t) = &e else { panic!("{e:?}") };
    assert_eq!(t.problems()[0].field, "write_size");
    assert!(e.is_invalid_scenario());
    assert!(e.to_string().contains("write_size: 0 bytes is out of range"), "{e}");
}
