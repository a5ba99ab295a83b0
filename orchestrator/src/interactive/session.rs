//! The interactive session loop: read a line, run it as a turn of the agent loop (or as a
//! slash command), show what happens as it happens, answer permission questions with one
//! key, until the user exits.
//!
//! One task owns the screen and the keys: the turn's future, its events, its questions
//! and the keys are all polled by the same `select!`, so output never interleaves and a
//! key always goes to exactly one place (an open question first, else the turn).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::execute;
use tokio::sync::{mpsc, watch};

use super::always::{self, SessionRules};
use super::commands::{self, Command};
use super::editor::{Edit, LineEditor};
use super::keys::{Key, Keys};
use super::preview;
use super::prompter::{Question, TerminalPrompter};
use super::render::{Screen, mode_label};
use crate::agent::gate::{PermissionPrompter, PromptAnswer};
use crate::agent::{AgentLoop, LoopEvent, RunOutcome};
use crate::checkpoints::Checkpoints;
use crate::permissions::{Engine, PermissionMode};
use crate::settings::local_rules;
use crate::tools::{Interrupter, ToolContext};
use crate::trust::TrustStore;

/// What the session is built around (made by the same builder as a headless run).
pub struct SessionParts {
    pub engine: Arc<Engine>,
    pub interrupter: Interrupter,
    /// For previews that read through the sandbox (the file a Write replaces).
    pub ctx: ToolContext,
    pub workspace: PathBuf,
    pub session_id: String,
    pub transcript: PathBuf,
    pub checkpoints: Option<Checkpoints>,
    /// The session's sandbox, frozen while `/rewind` changes the files (its background
    /// commands run between turns).
    pub sandbox: Option<Arc<crate::sandbox::Supervisor>>,
    /// Messages carried over from a resumed session.
    pub resumed_messages: usize,
    /// The record of trusted workspaces: `/trust` writes it, and the session's own edits
    /// of `.claude/settings.local.json` keep it current.
    pub trust_store: Option<TrustStore>,
    /// The session was built with the workspace's settings trusted.
    pub trusted: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum InteractiveError {
    #[error("cannot put the terminal in raw mode: {0}")]
    RawMode(std::io::Error),
}

/// An interactive session, before it runs.
pub struct Interactive {
    pub(super) parts: SessionParts,
    pub(super) rules: Arc<SessionRules>,
    questions: mpsc::UnboundedReceiver<Question>,
    /// The modes Shift-Tab cycles through, in order.
    modes: Vec<PermissionMode>,
}

/// Restores the terminal however the session ends.
struct RawMode;

impl RawMode {
    fn enable() -> Result<Self, InteractiveError> {
        crossterm::terminal::enable_raw_mode().map_err(InteractiveError::RawMode)?;
        let _ = execute!(std::io::stdout(), EnableBracketedPaste);
        Ok(RawMode)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), DisableBracketedPaste);
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// Shift-Tab's cycle, as Claude Code's: default, acceptEdits, plan; bypassPermissions (or
/// another mode) only when the session started in it.
pub fn mode_cycle(start: PermissionMode) -> Vec<PermissionMode> {
    let mut modes = vec![
        PermissionMode::Default,
        PermissionMode::AcceptEdits,
        PermissionMode::Plan,
    ];
    if !modes.contains(&start) {
        modes.push(start);
    }
    modes
}

/// The mode after `current` in `modes`.
pub fn next_mode(modes: &[PermissionMode], current: PermissionMode) -> PermissionMode {
    let at = modes.iter().position(|m| *m == current).unwrap_or(0);
    modes[(at + 1) % modes.len()]
}

impl Interactive {
    /// The session and the prompter its gate asks through.
    pub fn new(parts: SessionParts) -> (Self, Arc<dyn PermissionPrompter>) {
        let (tx, questions) = mpsc::unbounded_channel();
        let rules = SessionRules::new();
        let prompter = TerminalPrompter::new(
            tx,
            parts.engine.clone(),
            rules.clone(),
            local_rules::local_file(&parts.workspace),
            parts.ctx.interrupt_signal(),
        );
        let modes = mode_cycle(parts.engine.mode());
        let session = Self {
            parts,
            rules,
            questions,
            modes,
        };
        (session, Arc::new(prompter))
    }

    /// Runs the session until the user exits.
    pub async fn serve(
        self,
        agent: &mut AgentLoop,
        events: mpsc::UnboundedReceiver<LoopEvent>,
        keys: Keys,
    ) -> Result<(), InteractiveError> {
        let _raw = RawMode::enable()?;
        let interrupts = self.parts.ctx.interrupt_signal();
        let mut session = Running {
            me: self,
            screen: Screen::new(),
            editor: LineEditor::new(),
            keys,
            ahead: VecDeque::new(),
            events,
            interrupts,
        };
        session.banner();
        session.run(agent).await;
        session.screen.newline();
        session.screen.flush();
        Ok(())
    }
}

/// An open question and how far its answer got.
struct Open {
    question: Question,
    /// After `n`: the reason being typed.
    reason: Option<LineEditor>,
}

pub(super) struct Running {
    pub(super) me: Interactive,
    pub(super) screen: Screen,
    editor: LineEditor,
    keys: Keys,
    /// Keys typed during a turn, for the next prompt (as a shell keeps type-ahead).
    ahead: VecDeque<Key>,
    events: mpsc::UnboundedReceiver<LoopEvent>,
    interrupts: watch::Receiver<u64>,
}

const CHOICES: &str = "[y] yes once  [a] always  [n] no (then say why)";

impl Running {
    fn banner(&mut self) {
        let p = &self.me.parts;
        let text = format!(
            "Cordon · session {} · {}\n/help for commands · Shift-Tab changes the mode · Ctrl-C interrupts",
            p.session_id,
            p.workspace.display()
        );
        self.screen.note(&text);
        if p.resumed_messages > 0 {
            let n = p.resumed_messages;
            self.screen.note(&format!(
                "resumed: {n} earlier messages are in the conversation"
            ));
        }
    }

    fn label(&self) -> String {
        mode_label(self.me.parts.engine.mode())
    }

    /// Shift-Tab: the next mode the engine accepts.
    fn cycle_mode(&mut self) {
        let engine = &self.me.parts.engine;
        let mut next = engine.mode();
        for _ in 0..self.me.modes.len() {
            next = next_mode(&self.me.modes, next);
            if engine.try_set_mode(next).is_ok() {
                break;
            }
        }
    }

    async fn run(&mut self, agent: &mut AgentLoop) {
        while let Some(line) = self.read_prompt().await {
            match commands::parse(&line) {
                None => self.turn(agent, &line).await,
                Some(Command::Compact) => self.turn(agent, "/compact").await,
                Some(Command::Context) => self.turn(agent, "/context").await,
                Some(Command::Exit) => break,
                Some(Command::Help) => self.screen.note(commands::HELP),
                Some(Command::Rewind) => self.rewind().await,
                Some(Command::Permissions) => self.permissions().await,
                Some(Command::Trust) => self.trust(),
                Some(Command::Unknown(name)) if agent.has_command(&name) => {
                    self.turn(agent, &line).await
                }
                Some(Command::Unknown(name)) => self
                    .screen
                    .error(&format!("unknown command /{name}; /help lists them")),
            }
        }
    }

    /// The next line typed at the prompt; `None` to exit (Ctrl-D at an empty line, or
    /// Ctrl-C twice at an empty line).
    async fn read_prompt(&mut self) -> Option<String> {
        let mut armed = false;
        loop {
            let label = self.label();
            self.screen.prompt(&label, &self.editor);
            let key = self.next_key().await?;
            match self.editor.handle(key) {
                Edit::Changed => armed = false,
                Edit::Submitted(text) => {
                    self.screen.end_prompt();
                    if !text.trim().is_empty() {
                        return Some(text);
                    }
                }
                Edit::Other(Key::Interrupt) if armed => {
                    self.screen.end_prompt();
                    return None;
                }
                Edit::Other(Key::Interrupt) if !self.editor.is_empty() => self.editor.clear(),
                Edit::Other(Key::Interrupt) => {
                    armed = true;
                    self.screen.end_prompt();
                    self.screen.note("(press Ctrl-C again to exit)");
                }
                Edit::Other(Key::Eof) if self.editor.is_empty() => {
                    self.screen.end_prompt();
                    return None;
                }
                Edit::Other(Key::CycleMode) => self.cycle_mode(),
                Edit::Other(_) => {}
            }
        }
    }

    /// The next key: typed ahead during the last turn, else from the terminal (`None` when
    /// the terminal is gone).
    async fn next_key(&mut self) -> Option<Key> {
        match self.ahead.pop_front() {
            Some(key) => Some(key),
            None => self.keys.next().await,
        }
    }

    /// A line typed in answer to `label` (`None` when cancelled with Esc or Ctrl-C).
    pub(super) async fn read_line(&mut self, label: &str) -> Option<String> {
        let mut editor = LineEditor::new();
        loop {
            self.screen.prompt(label, &editor);
            match editor.handle(self.next_key().await?) {
                Edit::Submitted(text) => {
                    self.screen.end_prompt();
                    return Some(text);
                }
                Edit::Other(Key::Interrupt | Key::Esc | Key::Eof) => {
                    self.screen.end_prompt();
                    return None;
                }
                _ => {}
            }
        }
    }

    /// One turn: the prompt runs; its output, questions and keys are handled as they come.
    async fn turn(&mut self, agent: &mut AgentLoop, prompt: &str) {
        self.screen.streamed = false;
        let mut waiting: VecDeque<Question> = VecDeque::new();
        let mut open: Option<Open> = None;
        let outcome = {
            // Its own receiver: the run marks what it has seen; the session's stays as is.
            let mut interrupts = self.interrupts.clone();
            let run = agent.run(prompt, &mut interrupts);
            tokio::pin!(run);
            loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    Some(event) = self.events.recv() => show_event(&mut self.screen, event),
                    Some(question) = self.me.questions.recv() => waiting.push_back(question),
                    Some(key) = self.keys.next() => self.turn_key(key, &mut open),
                }
                if open.is_none()
                    && let Some(question) = waiting.pop_front()
                {
                    // The call's own line (sent before the gate asked) comes first.
                    self.show_pending_events();
                    open = Some(self.show_question(question).await);
                }
            }
        };
        self.show_pending_events();
        self.finish(&outcome);
    }

    /// Shows the events already sent (the loop sends them before it goes on).
    fn show_pending_events(&mut self) {
        while let Ok(event) = self.events.try_recv() {
            show_event(&mut self.screen, event);
        }
    }

    fn finish(&mut self, outcome: &RunOutcome) {
        if outcome.is_error {
            self.screen.error(&outcome.text);
        } else if !self.screen.streamed && !outcome.text.is_empty() {
            self.screen.line(None, &outcome.text);
        }
        self.screen.newline();
        self.screen.flush();
    }

    async fn show_question(&mut self, question: Question) -> Open {
        let call = &question.call;
        let details = preview::details(&call.name, &call.input, Some(&self.me.parts.ctx)).await;
        let summary = preview::summary(&call.name, &call.input);
        // What was typed before the question is on the screen is no answer to it: the
        // keys already queued are handled as any key with no question open (type-ahead
        // for the next prompt, Ctrl-C interrupting).
        for key in self.keys.typed_before_question().await {
            self.turn_key(key, &mut None);
        }
        self.screen
            .question(&summary, &question.why, &details, CHOICES);
        Open {
            question,
            reason: None,
        }
    }

    /// A key during a turn: Shift-Tab changes the mode; the rest goes to the open question,
    /// else Ctrl-C interrupts and other keys wait for the next prompt.
    fn turn_key(&mut self, key: Key, open: &mut Option<Open>) {
        if key == Key::CycleMode {
            self.cycle_mode();
            let label = self.label();
            self.screen.note(&format!("mode: {label}"));
            return;
        }
        match open.take() {
            Some(question) => *open = self.question_key(key, question),
            None if key == Key::Interrupt => {
                self.me.parts.interrupter.interrupt();
                self.screen.note("interrupting…");
            }
            None => self.ahead.push_back(key),
        }
    }

    /// A key for the open question; returns it while it stays open.
    fn question_key(&mut self, key: Key, mut open: Open) -> Option<Open> {
        if key == Key::Interrupt {
            self.answer(open, deny_interrupt(), "interrupted");
            self.me.parts.interrupter.interrupt();
            return None;
        }
        if open.reason.is_some() {
            return self.reason_key(key, open);
        }
        match key {
            Key::Char('y' | 'Y') => {
                let input = open.question.call.input.clone();
                self.answer(open, PromptAnswer::Allow { input }, "allowed once");
                None
            }
            Key::Char('a' | 'A') => {
                self.allow_always(open);
                None
            }
            Key::Char('n' | 'N') => {
                self.screen.newline();
                self.screen
                    .note("Tell the model why (Enter sends; an empty line gives no reason):");
                let editor = LineEditor::new();
                self.screen.prompt("why?", &editor);
                open.reason = Some(editor);
                Some(open)
            }
            Key::Esc => {
                let answer = denial(&open.question.call.name, "");
                self.answer(open, answer, "denied");
                None
            }
            _ => Some(open),
        }
    }

    /// A key while the reason for a denial is typed.
    fn reason_key(&mut self, key: Key, mut open: Open) -> Option<Open> {
        let Some(reason) = open.reason.as_mut() else {
            return Some(open);
        };
        let text = match reason.handle(key) {
            Edit::Submitted(text) => text,
            Edit::Other(Key::Esc) => String::new(),
            _ => {
                self.screen.prompt("why?", reason);
                return Some(open);
            }
        };
        self.screen.end_prompt();
        let answer = denial(&open.question.call.name, &text);
        self.answer(open, answer, "denied");
        None
    }

    fn answer(&mut self, open: Open, answer: PromptAnswer, shown: &str) {
        self.screen.newline();
        self.screen.note(&format!("  → {shown}"));
        // The run may have ended meanwhile (an interrupt); nobody to tell then.
        let _ = open.question.reply.send(answer);
    }

    /// `a`: the rule that allows this call is written to settings.local.json and applies
    /// for the rest of the session; the call runs.
    fn allow_always(&mut self, open: Open) {
        let parts = &self.me.parts;
        let local = local_rules::local_file(&parts.workspace);
        let call = &open.question.call;
        let rules = always::suggest(&parts.engine, call, &parts.workspace, &local);
        let mut lines = Vec::new();
        if rules.is_empty() {
            lines.push("no rule can stand for this question; allowed once".to_string());
        }
        for rule in &rules {
            self.me.rules.add(rule);
            let store = parts.trust_store.as_ref();
            match local_rules::add_local_allow_rule(&parts.workspace, rule, store) {
                Ok(done) => lines.push(format!(
                    "added allow rule {} to {}{}",
                    done.rule,
                    local.display(),
                    kept_trust(&done)
                )),
                Err(e) => lines.push(format!(
                    "allow rule {rule} applies for this session only: {e}"
                )),
            }
        }
        let input = call.input.clone();
        self.answer(open, PromptAnswer::Allow { input }, &lines.join("\n  → "));
    }
}

/// What an edit of the local settings file did to the workspace's trust, for the screen.
pub(super) fn kept_trust(done: &local_rules::LocalRuleEdit) -> &'static str {
    if done.still_trusted && done.changed {
        " (the workspace stays trusted)"
    } else {
        ""
    }
}

fn show_event(screen: &mut Screen, event: LoopEvent) {
    match event {
        LoopEvent::TextDelta(text) => screen.text_delta(&text),
        LoopEvent::Assistant(message) | LoopEvent::User(message) => screen.message(&message),
        LoopEvent::Compacted { tokens_before } => screen.note(&format!(
            "compacted the conversation; it held about {tokens_before} tokens"
        )),
        // A sub-agent's own steps stay out of the conversation view: its report arrives
        // as the Agent call's result.
        LoopEvent::Subagent { .. } => {}
        // Raw API events are for stream-json clients that asked for them.
        LoopEvent::Stream(_) => {}
    }
}

/// The model's denial for `tool`, with the user's reason when one was given.
fn denial(tool: &str, reason: &str) -> PromptAnswer {
    let reason = reason.trim();
    let message = if reason.is_empty() {
        format!("The user denied permission to use {tool}.")
    } else {
        format!("The user denied permission to use {tool}: {reason}")
    };
    PromptAnswer::Deny {
        message,
        interrupt: false,
    }
}

fn deny_interrupt() -> PromptAnswer {
    PromptAnswer::Deny {
        message: "interrupted by the user while asking for permission".into(),
        interrupt: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shift_tab_cycles_like_claude_code() {
        use PermissionMode::{AcceptEdits, BypassPermissions, Default, Plan};
        let walk = |start, from| {
            let modes = mode_cycle(start);
            let mut seen = vec![from];
            for _ in 0..modes.len() {
                seen.push(next_mode(&modes, *seen.last().unwrap()));
            }
            seen
        };
        assert_eq!(
            walk(Default, Default),
            vec![Default, AcceptEdits, Plan, Default]
        );
        assert_eq!(
            walk(BypassPermissions, Default),
            vec![Default, AcceptEdits, Plan, BypassPermissions, Default]
        );
    }

    #[test]
    fn a_denial_carries_the_reason() {
        assert_eq!(
            denial("Bash", " use make "),
            PromptAnswer::Deny {
                message: "The user denied permission to use Bash: use make".into(),
                interrupt: false
            }
        );
    }
}
