//! The slash commands that talk with the user: `/rewind` (pick a checkpoint, restore the
//! files) and `/permissions` (list the rules, remove a local one).

use crossterm::style::Color;

use super::commands;
use super::session::{Running, kept_trust};
use crate::settings::local_rules;

impl Running {
    pub(super) async fn rewind(&mut self) {
        let Some(checkpoints) = self.me.parts.checkpoints.clone() else {
            self.screen.error("this session keeps no checkpoints");
            return;
        };
        let choices = match commands::rewind_choices(&checkpoints, &self.me.parts.transcript) {
            Ok(c) if c.is_empty() => {
                self.screen
                    .note("no checkpoints yet (one is taken before each prompt runs)");
                return;
            }
            Ok(c) => c,
            Err(e) => {
                self.screen
                    .error(&format!("cannot list the checkpoints: {e}"));
                return;
            }
        };
        for (i, c) in choices.iter().enumerate() {
            let n = i + 1;
            self.screen
                .line(None, &format!("{n:>3}. {}  {}", c.created_at, c.prompt));
        }
        let Some(picked) = self
            .pick("restore the files to before prompt", choices.len())
            .await
        else {
            return;
        };
        let uuid = choices[picked].user_message_uuid.clone();
        // While no sandbox process runs: a background command keeps running between
        // turns, and must not change the tree while it is captured and restored.
        let store = std::sync::Arc::new(checkpoints);
        let wanted = uuid.clone();
        let done =
            crate::checkpoints::while_quiet(&store, self.me.parts.sandbox.as_ref(), move |c| {
                c.rewind(&wanted)
            })
            .await;
        match done {
            Ok(report) => {
                // The names are the session's: one with a newline must not fake a line.
                let name = |p: &std::path::Path| {
                    crate::output::name_for_terminal(&p.to_string_lossy()).into_owned()
                };
                for p in &report.restored {
                    self.screen.note(&format!("restored {}", name(p)));
                }
                for p in &report.removed {
                    self.screen.note(&format!("removed {}", name(p)));
                }
                for p in &report.skipped {
                    self.screen
                        .note(&format!("left as is (too large) {}", name(p)));
                }
                self.screen.line(
                    Some(Color::Green),
                    &format!(
                        "files rewound to before prompt {}: {} restored, {} removed. The \
                         conversation goes on; `cordon rewind --session {} --to {uuid} \
                         --conversation` also rewinds it.",
                        picked + 1,
                        report.restored.len(),
                        report.removed.len(),
                        self.me.parts.session_id
                    ),
                );
            }
            Err(e) => self.screen.error(&format!("rewind failed: {e}")),
        }
    }

    /// A number from 1 to `count`, typed; `None` when cancelled or empty.
    async fn pick(&mut self, what: &str, count: usize) -> Option<usize> {
        let answer = self
            .read_line(&format!("{what} (1-{count}, Enter cancels)"))
            .await?;
        let answer = answer.trim();
        if answer.is_empty() {
            return None;
        }
        match answer.parse::<usize>() {
            Ok(n) if (1..=count).contains(&n) => Some(n - 1),
            _ => {
                self.screen
                    .error(&format!("{answer:?} is not a number from 1 to {count}"));
                None
            }
        }
    }

    pub(super) async fn permissions(&mut self) {
        let parts = &self.me.parts;
        let local = local_rules::local_file(&parts.workspace);
        let rules = commands::permission_rules(&parts.engine, &self.me.rules, &local);
        let mode = parts.engine.mode();
        self.screen.note(&format!("mode: {}", mode.as_str()));
        if rules.is_empty() {
            self.screen.note("no permission rules");
            return;
        }
        for (i, rule) in rules.iter().enumerate() {
            let line = commands::rule_line(i + 1, rule);
            self.screen.line(None, &line);
        }
        if !rules.iter().any(|r| r.local) {
            return;
        }
        let Some(picked) = self.pick("remove local rule", rules.len()).await else {
            return;
        };
        let rule = &rules[picked];
        if !rule.local {
            self.screen.error(&format!(
                "{} comes from {}, not from {}: edit that file to remove it",
                rule.rule,
                rule.source,
                local.display()
            ));
            return;
        }
        let parts = &self.me.parts;
        let store = parts.trust_store.as_ref();
        match local_rules::remove_local_rule(&parts.workspace, rule.list, &rule.rule, store) {
            Ok(done) => {
                let live = self.me.rules.remove(&rule.rule) && rule.this_session;
                let when = if live {
                    "calls it allowed ask again from now on"
                } else {
                    "it stops applying in the next session (rules are loaded when a session starts)"
                };
                self.screen.note(&format!(
                    "removed {} from {}; {when}{}",
                    rule.rule,
                    local.display(),
                    kept_trust(&done)
                ));
            }
            Err(e) => self
                .screen
                .error(&format!("cannot remove {}: {e}", rule.rule)),
        }
    }
}
