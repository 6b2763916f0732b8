//! Every `unsafe extern "system" fn` the crate defines — the entries of its export tables and
//! the trampolines it hands a controller or a CM — documents its C contract in a `# Safety`
//! section, and so does every `unsafe extern "both" fn` (an export table entry defined once for
//! both conventions by `entry_points!`, whose documentation the generated entry points refer
//! to). Clippy's `missing_safety_doc` looks at public functions only, and these are private
//! generic functions whose addresses go into C tables.

use std::fs;
use std::path::Path;

/// The C entry points defined in these forms.
const DEFINITIONS: [&str; 2] = ["unsafe extern \"system\" fn ", "unsafe extern \"both\" fn "];

/// The `unsafe extern "system" fn` and `unsafe extern "both" fn` definitions of `text` (not
/// pointer types) whose doc comment has no `# Safety` section: their names and lines.
fn undocumented(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut missing = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let Some(rest) = DEFINITIONS.iter().find_map(|d| code.strip_prefix(d)) else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // a function pointer type, not a definition
        }
        let documented = lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim_start())
            .take_while(|l| l.starts_with("///") || l.starts_with("#["))
            .any(|l| l == "/// # Safety");
        if !documented {
            missing.push((name, i + 1));
        }
    }
    missing
}

#[test]
fn every_c_entry_point_has_a_safety_section() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    let mut missing = Vec::new();
    for entry in fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        checked += DEFINITIONS
            .iter()
            .map(|d| text.matches(d).count())
            .sum::<usize>();
        for (name, line) in undocumented(&text) {
            missing.push(format!("{}:{line}: {name}", path.display()));
        }
    }
    // The export tables alone define 28 verbs and 15 CM entries.
    assert!(
        checked > 43,
        "only {checked} definitions found under {}",
        src.display()
    );
    assert!(
        missing.is_empty(),
        "no `# Safety` section:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_check_sees_a_missing_section() {
    let text = "/// Does a thing.\nunsafe extern \"system\" fn f(p: *mut u8) {}\n\
                /// Does a thing.\n///\n/// # Safety\n/// `p` is valid.\nunsafe extern \"system\" fn g(p: *mut u8) {}\n\
                type F = Option<unsafe extern \"system\" fn(*mut u8)>;\n\
                /// Does a thing.\n    unsafe extern \"both\" fn h<V: Verbs>(p: *mut u8) {}\n";
    assert_eq!(
        undocumented(text),
        vec![("f".to_string(), 2), ("h".to_string(), 10)]
    );
}
