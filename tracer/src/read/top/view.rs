//! `tracer top`'s screen: the processes of a [`Snapshot`] as a table, sorted by the column the keys
//! choose, with rates over the last second; the recording's state above, its messages below.

use std::{
    collections::{BTreeMap, HashMap},
    time::{Duration, Instant},
};

use ratatui::{
    Frame,
    crossterm::event::{KeyCode, KeyEvent, KeyModifiers},
    layout::{Constraint, Layout},
    style::{Modifier, Style},
    text::{Line, Text},
    widgets::{Block, Borders, Cell, Paragraph, Row as TableRow, Table},
};

use super::model::{Row, Snapshot};

/// The columns a user can sort by, in the order `s` cycles them (`1`..`5` choose one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SortKey {
    /// Kernel executions so far, most first.
    #[default]
    Kernels,
    /// Kernel executions a second, most first.
    Rate,
    /// Tokens so far, most first.
    Tokens,
    /// Process id, lowest first.
    Pid,
    /// Process name, in order.
    Comm,
}

impl SortKey {
    const ALL: [Self; 5] = [Self::Kernels, Self::Rate, Self::Tokens, Self::Pid, Self::Comm];

    const fn name(self) -> &'static str {
        match self {
            Self::Kernels => "kernels",
            Self::Rate => "kernels/s",
            Self::Tokens => "tokens",
            Self::Pid => "pid",
            Self::Comm => "comm",
        }
    }

    fn next(self) -> Self {
        let i = Self::ALL.iter().position(|k| *k == self).unwrap_or(0);
        Self::ALL.get(i + 1).copied().unwrap_or(Self::Kernels)
    }
}

/// What a key asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    None,
    Quit,
}

/// One process's rates over the last window.
#[derive(Clone, Debug, Default)]
struct Rates {
    kernels: u64,
    families: BTreeMap<String, u64>,
    tokens: BTreeMap<&'static str, u64>,
    /// The phase that closed the most steps in the window.
    current: Option<&'static str>,
}

/// What a process's counts were at the window's start.
#[derive(Clone, Debug, Default)]
struct Sample {
    families: BTreeMap<String, u64>,
    /// Phase -> (steps, tokens).
    phases: BTreeMap<&'static str, (u64, u64)>,
}

impl Sample {
    fn of(row: &Row) -> Self {
        Self {
            families: row.families.clone(),
            phases: row.phases.iter().map(|p| (p.phase, (p.steps, p.tokens))).collect(),
        }
    }
}

/// `n` over `elapsed`, a second's worth (integers: a count a second is what is shown).
fn per_second(n: u64, elapsed: Duration) -> u64 {
    let ms = elapsed.as_millis().max(1);
    u64::try_from(u128::from(n) * 1000 / ms).unwrap_or(u64::MAX)
}

/// Traps a token to one decimal ("1.5"), "-" without tokens.
pub(crate) fn per_token(traps: u64, tokens: u64) -> String {
    if tokens == 0 {
        return "-".to_owned();
    }
    let tenths = u128::from(traps) * 10 / u128::from(tokens);
    format!("{}.{}", tenths / 10, tenths % 10)
}

/// The sort, the rates and the scroll of the screen.
#[derive(Default)]
pub(crate) struct View {
    pub(crate) sort: SortKey,
    pub(crate) reverse: bool,
    offset: usize,
    window: Option<Instant>,
    samples: HashMap<u32, Sample>,
    rates: HashMap<u32, Rates>,
}

impl View {
    /// A key pressed.
    pub(crate) fn key(&mut self, k: KeyEvent) -> Action {
        match k.code {
            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => return Action::Quit,
            KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Char('r') => self.reverse = !self.reverse,
            KeyCode::Char(c @ '1'..='5') => {
                let i = usize::from(u8::try_from(c).unwrap_or(b'1').saturating_sub(b'1'));
                self.sort = SortKey::ALL.get(i).copied().unwrap_or_default();
            }
            KeyCode::Down => self.offset = self.offset.saturating_add(1),
            KeyCode::Up => self.offset = self.offset.saturating_sub(1),
            _ => {}
        }
        Action::None
    }

    /// The rates, once a second: what each process's counts grew by since the last time.
    pub(crate) fn update(&mut self, snap: &Snapshot, now: Instant) {
        let Some(start) = self.window else {
            self.window = Some(now);
            self.samples = snap.rows.iter().map(|r| (r.pid, Sample::of(r))).collect();
            return;
        };
        let elapsed = now.saturating_duration_since(start);
        if elapsed < Duration::from_secs(1) {
            return;
        }
        self.rates.clear();
        for row in &snap.rows {
            let before = self.samples.get(&row.pid).cloned().unwrap_or_default();
            let mut r = Rates::default();
            for (family, n) in &row.families {
                let d = n.saturating_sub(before.families.get(family).copied().unwrap_or(0));
                r.kernels = r.kernels.saturating_add(d);
                if d > 0 {
                    r.families.insert(family.clone(), per_second(d, elapsed));
                }
            }
            r.kernels = per_second(r.kernels, elapsed);
            let mut most = 0;
            for p in &row.phases {
                let (steps, tokens) = before.phases.get(p.phase).copied().unwrap_or((0, 0));
                r.tokens.insert(p.phase, per_second(p.tokens.saturating_sub(tokens), elapsed));
                if p.steps.saturating_sub(steps) > most {
                    most = p.steps.saturating_sub(steps);
                    r.current = Some(p.phase);
                }
            }
            self.rates.insert(row.pid, r);
        }
        self.window = Some(now);
        self.samples = snap.rows.iter().map(|r| (r.pid, Sample::of(r))).collect();
    }

    fn rate(&self, pid: u32) -> u64 {
        self.rates.get(&pid).map_or(0, |r| r.kernels)
    }

    /// The rows with GPU activity, in the chosen order (ties by pid).
    pub(crate) fn order<'a>(&self, rows: &'a [Row]) -> Vec<&'a Row> {
        let mut shown: Vec<&Row> = rows.iter().filter(|r| r.gpu_activity()).collect();
        shown.sort_by(|a, b| {
            let by = match self.sort {
                SortKey::Kernels => b.executions().cmp(&a.executions()),
                SortKey::Rate => self.rate(b.pid).cmp(&self.rate(a.pid)),
                SortKey::Tokens => b.tokens().cmp(&a.tokens()),
                SortKey::Pid => a.pid.cmp(&b.pid),
                SortKey::Comm => a.comm.cmp(&b.comm),
            };
            let by = if self.reverse { by.reverse() } else { by };
            by.then(a.pid.cmp(&b.pid))
        });
        shown
    }

    /// Draws the whole screen: `state` says what the recording is doing, `messages` its last lines.
    pub(crate) fn draw(&mut self, frame: &mut Frame<'_>, snap: &Snapshot, state: &str, messages: &[String]) {
        let [head, body, tail, keys] =
            Layout::vertical([Constraint::Length(2), Constraint::Min(4), Constraint::Length(6), Constraint::Length(1)])
                .areas(frame.area());
        let rows = self.order(&snap.rows);
        let exited = rows.iter().filter(|r| r.exited).count();
        let hidden = snap.rows.len().saturating_sub(rows.len());
        let head_text = vec![
            Line::from(format!(
                "tracer top - {state} - records {} - dropped {} - probes missing {}",
                snap.records, snap.dropped, snap.probes_missing
            )),
            Line::from(format!(
                "{} processes with GPU calls ({exited} exited); {hidden} without, not shown; {} exited processes no longer kept",
                rows.len(),
                snap.exited_not_shown
            )),
        ];
        frame.render_widget(Paragraph::new(head_text), head);
        self.offset = self.offset.min(rows.len().saturating_sub(1));
        frame.render_widget(self.table(rows.get(self.offset..).unwrap_or_default()), body);
        let shown = messages.len().saturating_sub(4);
        let lines: Vec<Line<'_>> =
            messages.get(shown..).unwrap_or_default().iter().map(|m| Line::from(m.as_str())).collect();
        frame.render_widget(
            Paragraph::new(lines).block(Block::default().borders(Borders::TOP).title(" messages ")),
            tail,
        );
        let help = format!(
            "sort: {}{} - s: next column, 1-5: kernels, kernels/s, tokens, pid, comm; r: reverse; up/down: scroll; q: quit",
            self.sort.name(),
            if self.reverse { " (reversed)" } else { "" }
        );
        frame.render_widget(Paragraph::new(help).style(Style::default().add_modifier(Modifier::REVERSED)), keys);
    }

    fn table(&self, rows: &[&Row]) -> Table<'static> {
        let header = ["PID", "COMM", "ROLE", "MODEL", "KERNELS", "K/S", "PHASE", "TRAPS/TOK", "LATE", "LIBRARIES"]
            .into_iter()
            .chain(["FAMILIES (total, /s)", "PHASES"]);
        let marked = |h: &'static str| {
            let sorted = match self.sort {
                SortKey::Kernels => "KERNELS",
                SortKey::Rate => "K/S",
                SortKey::Tokens => "PHASES",
                SortKey::Pid => "PID",
                SortKey::Comm => "COMM",
            };
            if h == sorted {
                Cell::from(h).style(Style::default().add_modifier(Modifier::UNDERLINED))
            } else {
                Cell::from(h)
            }
        };
        let header = TableRow::new(header.map(marked)).style(Style::default().add_modifier(Modifier::BOLD));
        let body: Vec<TableRow<'static>> = rows.iter().map(|r| self.row(r)).collect();
        let widths = [
            Constraint::Length(7),
            Constraint::Length(16),
            Constraint::Length(13),
            Constraint::Length(18),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(4),
            Constraint::Length(24),
            Constraint::Length(30),
            Constraint::Min(30),
        ];
        Table::new(body, widths).header(header)
    }

    fn row(&self, r: &Row) -> TableRow<'static> {
        let rates = self.rates.get(&r.pid).cloned().unwrap_or_default();
        let mut families: Vec<(&String, &u64)> = r.families.iter().collect();
        families.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut family_lines: Vec<Line<'static>> = families
            .iter()
            .take(5)
            .map(|(f, n)| Line::from(format!("{f} {n} {}/s", rates.families.get(*f).copied().unwrap_or(0))))
            .collect();
        if families.len() > 5 {
            family_lines.push(Line::from(format!("+{} more families", families.len() - 5)));
        }
        let phase_lines: Vec<Line<'static>> = r
            .phases
            .iter()
            .map(|p| {
                let rate = rates.tokens.get(p.phase).copied().unwrap_or(0);
                let traps = per_token(p.traps, p.tokens);
                Line::from(format!("{} {} steps {} tok {rate} tok/s {traps} traps/tok", p.phase, p.steps, p.tokens))
            })
            .collect();
        let mut libs: Vec<Line<'static>> = r.libraries.iter().take(4).map(|l| Line::from(l.clone())).collect();
        if r.libraries.len() > 4 {
            libs.push(Line::from(format!("+{} more", r.libraries.len() - 4)));
        }
        let phase = if r.exited {
            "exited".to_owned()
        } else {
            rates.current.map_or_else(|| if r.phases.is_empty() { "-" } else { "idle" }.to_owned(), str::to_owned)
        };
        let height = family_lines.len().max(phase_lines.len()).max(libs.len()).clamp(1, 6);
        let dash = |s: Option<&str>| s.filter(|s| !s.is_empty()).unwrap_or("-").to_owned();
        TableRow::new(vec![
            Cell::from(r.pid.to_string()),
            Cell::from(dash(Some(&r.comm)).replace(' ', "_")),
            Cell::from(dash(r.role)),
            Cell::from(dash(r.model.as_deref())),
            Cell::from(r.executions().to_string()),
            Cell::from(if r.exited { "-".to_owned() } else { rates.kernels.to_string() }),
            Cell::from(phase),
            Cell::from(per_token(r.traps(), r.tokens())),
            Cell::from(r.probed_late.to_string()),
            Cell::from(Text::from(libs)),
            Cell::from(Text::from(family_lines)),
            Cell::from(Text::from(phase_lines)),
        ])
        .height(u16::try_from(height).unwrap_or(1))
    }
}
