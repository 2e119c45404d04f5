//! docs/lab.md lists every built-in scenario and every `case` they use,
//! so that the README and the docs never state a number or point to a list
//! that is not the code's. (Nothing here runs the lab.)

use tcpwhy_lab::scenario::{load, source, BUILTIN};

#[test]
fn builtin_scenarios_are_the_documented_ones() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/lab.md")).unwrap();
    let section = &doc[doc.find("## The built-in scenarios").expect("the section")..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let first_cells: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .collect();
    let mut rows = 0;
    for (name, _) in BUILTIN {
        let (origin, text) = source(name).unwrap();
        let s = load(&origin, &text, &[]).unwrap();
        assert!(
            first_cells.contains(name),
            "docs/lab.md has no row for scenario {name}"
        );
        assert!(
            first_cells.contains(&s.case.as_str()),
            "docs/lab.md does not say what case {} ({name}) is",
            s.case
        );
        rows += 1;
    }
    let documented = first_cells
        .iter()
        .filter(|c| BUILTIN.iter().any(|(n, _)| n == *c) || c.contains('-'))
        .count();
    assert_eq!(
        documented, rows,
        "docs/lab.md lists a scenario that is not built in"
    );
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    assert!(
        !readme.contains("CASES.md"),
        "README.md points to a file that does not exist"
    );
}
