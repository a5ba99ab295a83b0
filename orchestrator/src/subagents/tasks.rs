//! [`Tasks`]: a session's running sub-agents, by task id, so a client can see them start
//! and end (the SDK's `task_started` / `task_notification` records) and stop one
//! (`stop_task`) without interrupting the rest of the session.
//!
//! A task's stop signal is its own watch channel: the session's interrupts are forwarded
//! into it, and `stop_task` bumps it alone, so the sub-agent's model call and its tools
//! (Bash, MCP calls watch the context's signal) end as on an interrupt, the parent's do
//! not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How a task ended (the SDK's `task_notification` statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Completed,
    Failed,
    /// Stopped by `stop_task` or the session's interrupt.
    Stopped,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }
}

/// A moment of a task's life, for whoever shows tasks to the client.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEvent {
    Started {
        task_id: String,
        description: String,
        agent_type: String,
    },
    Ended {
        task_id: String,
        status: TaskStatus,
        summary: String,
        /// The sub-agent's transcript (its sidechain).
        output_file: String,
    },
}

/// Told about every task's start and end.
pub type TaskListener = Arc<dyn Fn(TaskEvent) + Send + Sync>;

#[derive(Default)]
struct Inner {
    running: HashMap<String, watch::Sender<u64>>,
    listener: Option<TaskListener>,
}

/// The running tasks of one session (cheap to clone; clones share them).
#[derive(Clone, Default)]
pub struct Tasks(Arc<Mutex<Inner>>);

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("running", &self.running())
            .finish()
    }
}

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Single map operations under the lock: a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Who hears of tasks starting and ending (the stream-json connection).
    pub fn set_listener(&self, listener: TaskListener) {
        self.lock().listener = Some(listener);
    }

    fn tell(&self, event: TaskEvent) {
        let listener = self.lock().listener.clone();
        if let Some(listener) = listener {
            listener(event);
        }
    }

    /// The ids of the running tasks, sorted.
    pub fn running(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock().running.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Registers the task `task_id` and announces it. Its stop signal follows
    /// `session_interrupts` too.
    pub fn start(
        &self,
        task_id: &str,
        description: &str,
        agent_type: &str,
        mut session_interrupts: watch::Receiver<u64>,
    ) -> RunningTask {
        let (tx, rx) = watch::channel(0u64);
        let forward = tx.clone();
        let forwarder = tokio::spawn(async move {
            while session_interrupts.changed().await.is_ok() {
                forward.send_modify(|n| *n = n.wrapping_add(1));
            }
        });
        self.lock().running.insert(task_id.to_string(), tx);
        self.tell(TaskEvent::Started {
            task_id: task_id.to_string(),
            description: description.to_string(),
            agent_type: agent_type.to_string(),
        });
        RunningTask {
            tasks: self.clone(),
            id: task_id.to_string(),
            stop: rx,
            forwarder,
            ended: false,
        }
    }

    /// `stop_task`: stops the running task `task_id`.
    pub fn stop(&self, task_id: &str) -> Result<(), String> {
        match self.lock().running.get(task_id) {
            Some(tx) => {
                tx.send_modify(|n| *n = n.wrapping_add(1));
                Ok(())
            }
            None => Err(format!("no running task with id {task_id:?}")),
        }
    }
}

/// One running task; dropping it without [`RunningTask::end`] (its call was cancelled)
/// reports it stopped.
pub struct RunningTask {
    tasks: Tasks,
    id: String,
    stop: watch::Receiver<u64>,
    forwarder: JoinHandle<()>,
    ended: bool,
}

impl RunningTask {
    /// The task's stop signal (interrupts of the session, and `stop_task`).
    pub fn stop_signal(&self) -> watch::Receiver<u64> {
        let mut rx = self.stop.clone();
        rx.borrow_and_update();
        rx
    }

    /// Unregisters the task and announces how it ended.
    pub fn end(mut self, status: TaskStatus, summary: &str, output_file: &str) {
        self.finish(status, summary, output_file);
    }

    fn finish(&mut self, status: TaskStatus, summary: &str, output_file: &str) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        self.forwarder.abort();
        self.tasks.lock().running.remove(&self.id);
        self.tasks.tell(TaskEvent::Ended {
            task_id: self.id.clone(),
            status,
            summary: summary.to_string(),
            output_file: output_file.to_string(),
        });
    }
}

impl Drop for RunningTask {
    fn drop(&mut self) {
        self.finish(
            TaskStatus::Stopped,
            "the sub-agent's call was cancelled",
            "",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording(tasks: &Tasks) -> Arc<Mutex<Vec<TaskEvent>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        tasks.set_listener(Arc::new(move |e| s.lock().unwrap().push(e)));
        seen
    }

    #[tokio::test]
    async fn stopping_a_task_signals_it_alone_and_its_end_is_announced() {
        let tasks = Tasks::default();
        let seen = recording(&tasks);
        let (_session, session_rx) = watch::channel(0u64);
        let a = tasks.start("a", "first", "general-purpose", session_rx.clone());
        let b = tasks.start("b", "second", "reviewer", session_rx);
        let (mut stop_a, stop_b) = (a.stop_signal(), b.stop_signal());
        assert_eq!(tasks.running(), ["a", "b"]);
        tasks.stop("a").unwrap();
        stop_a.changed().await.unwrap();
        assert!(!stop_b.has_changed().unwrap(), "b was not stopped");
        assert!(tasks.stop("nope").unwrap_err().contains("\"nope\""));
        a.end(TaskStatus::Stopped, "stopped", "/t/a.jsonl");
        drop(b);
        assert!(tasks.running().is_empty());
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 4);
        assert!(
            matches!(&seen[2], TaskEvent::Ended { task_id, status: TaskStatus::Stopped, .. } if task_id == "a")
        );
        assert!(
            matches!(&seen[3], TaskEvent::Ended { task_id, status: TaskStatus::Stopped, summary, .. } if task_id == "b" && summary.contains("cancelled"))
        );
    }

    #[tokio::test]
    async fn the_sessions_interrupt_reaches_every_task() {
        let tasks = Tasks::default();
        let (session, session_rx) = watch::channel(0u64);
        let a = tasks.start("a", "d", "t", session_rx);
        let mut stop = a.stop_signal();
        session.send_modify(|n| *n += 1);
        tokio::time::timeout(std::time::Duration::from_secs(5), stop.changed())
            .await
            .expect("forwarded")
            .unwrap();
        a.end(TaskStatus::Stopped, "", "");
    }
}
