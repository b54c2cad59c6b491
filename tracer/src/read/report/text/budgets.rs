//! The report's words on what the recorder refused one user, or the whole recording, past its budget
//! (`record/names/budget.rs`): per uid, from the footer's `kernel_handles_over_budget_uid_<uid>` and
//! `maps_reads_over_budget_uid_<uid>`, and the recording's `..._over_recording_budget`.

use std::fmt::Write as _;

use super::plural;
use crate::read::report::Report;

use crate::trace::counted::Counted;

impl Report {
    /// One line per user whose processes presented more than its budget, then one for the recording's.
    pub(super) fn write_budgets(&self, s: &mut String) -> std::fmt::Result {
        let mut users: std::collections::BTreeMap<&str, (u64, u64)> = std::collections::BTreeMap::new();
        for (uid, n) in Counted::KernelHandlesOverBudget.members(&self.counters).filter(|(_, n)| *n > 0) {
            users.entry(uid).or_default().0 = n;
        }
        for (uid, n) in Counted::MapsReadsOverBudget.members(&self.counters).filter(|(_, n)| *n > 0) {
            users.entry(uid).or_default().1 = n;
        }
        let counter = |c: Counted| c.in_footer(&self.counters);
        let recording =
            (counter(Counted::KernelHandlesOverRecordingBudget), counter(Counted::MapsReadsOverRecordingBudget));
        if users.is_empty() && recording == (0, 0) {
            return Ok(());
        }
        writeln!(s)?;
        for (uid, (handles, reads)) in users {
            let who = if uid == "unknown" {
                "processes of an unknown uid (ended before it was read)".to_owned()
            } else {
                format!("uid {uid}")
            };
            let mut said = Vec::new();
            if handles > 0 {
                said.push(format!(
                    "{handles} kernel handle{} past the per-user budget, their launches recorded without a kernel id",
                    plural(handles)
                ));
            }
            if reads > 0 {
                said.push(format!(
                    "{reads} address{} outside every file mapping past the per-user budget, not named from the \
                     process's files",
                    if reads == 1 { "" } else { "es" }
                ));
            }
            writeln!(s, "budget: {who}: {}", said.join("; "))?;
        }
        if recording != (0, 0) {
            writeln!(
                s,
                "budget: the whole recording's was spent: {} kernel handle{} and {} address{} outside every file \
                 mapping of users within their own budgets refused (counted with their uid above)",
                recording.0,
                plural(recording.0),
                recording.1,
                if recording.1 == 1 { "" } else { "es" }
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::read::report::Report;

    #[test]
    fn each_user_past_its_budget_is_one_line_in_words() {
        let mut r = Report::default();
        r.counters.insert("kernel_handles_over_budget_uid_65534".into(), 1_247_232);
        r.counters.insert("maps_reads_over_budget_uid_unknown".into(), 3);
        r.counters.insert("kernel_handles_over_recording_budget".into(), 0);
        let mut s = String::new();
        r.write_budgets(&mut s).unwrap();
        assert!(
            s.contains(
                "budget: uid 65534: 1247232 kernel handles past the per-user budget, their launches recorded without a \
             kernel id"
            ),
            "{s}"
        );
        assert!(s.contains("unknown uid") && s.contains("3 addresses outside every file mapping"), "{s}");
        assert!(!s.contains("whole recording"), "{s}");
        let mut quiet = String::new();
        Report::default().write_budgets(&mut quiet).unwrap();
        assert!(quiet.is_empty());
    }
}
