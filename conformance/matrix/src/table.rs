//! The summary: one row per check, one column per face, each cell a count of agreeing cases;
//! printed last and written to docs/matrix.md (deterministic: no timings).

use std::collections::BTreeMap;
use std::fmt::Write;

/// One cell: how many cases of a check a face passed.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    /// Cases that agreed.
    pub passed: u64,
    /// Cases run.
    pub total: u64,
}

impl Cell {
    /// A cell passes when every case ran and agreed (and there was at least one).
    pub fn ok(&self) -> bool {
        self.total > 0 && self.passed == self.total
    }
}

/// The face-by-check table.
#[derive(Default)]
pub struct Table {
    faces: Vec<String>,
    checks: Vec<String>,
    cells: BTreeMap<(String, String), Cell>,
}

impl Table {
    /// A table with these face columns, in order.
    pub fn new(faces: &[String]) -> Table {
        Table {
            faces: faces.to_vec(),
            ..Table::default()
        }
    }

    /// Adds `passed` of `total` cases of `check` for `face`.
    pub fn add(&mut self, check: &str, face: &str, passed: u64, total: u64) {
        if !self.checks.iter().any(|c| c == check) {
            self.checks.push(check.to_string());
        }
        let c = self
            .cells
            .entry((check.to_string(), face.to_string()))
            .or_default();
        c.passed += passed;
        c.total += total;
    }

    /// (cells passed, cells failed).
    pub fn counts(&self) -> (usize, usize) {
        let ok = self.cells.values().filter(|c| c.ok()).count();
        (ok, self.cells.len() - ok)
    }

    /// The table as Markdown, with the closing `N passed, N failed` line.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "| check | {} |", self.faces.join(" | "));
        let _ = writeln!(s, "|---|{}", "---|".repeat(self.faces.len()));
        for check in &self.checks {
            let _ = write!(s, "| {check} |");
            for face in &self.faces {
                match self.cells.get(&(check.clone(), face.clone())) {
                    Some(c) if c.ok() => {
                        let _ = write!(s, " ok {} |", c.passed);
                    }
                    Some(c) => {
                        let _ = write!(s, " **FAIL** {}/{} |", c.passed, c.total);
                    }
                    None => s.push_str(" - |"),
                }
            }
            s.push('\n');
        }
        let (ok, failed) = self.counts();
        let _ = writeln!(s, "\n{ok} passed, {failed} failed");
        s
    }
}
