//! Walks every tenant's chain and reports each place it does not hold: what
//! `cordon audit verify --data DIR` runs.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::Connection;
use serde::Serialize;

use super::chain::{GENESIS, Link};
use super::log::{AUDIT_DB, AuditError, open_db};

/// One place a chain does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum ChainProblem {
    /// The record's content no longer matches its hash: it was edited.
    Edited { tenant: String, seq: i64 },
    /// The record does not link to the one before it: one was removed, inserted or moved.
    BrokenLink { tenant: String, seq: i64 },
    /// Sequence numbers skip or repeat: records were deleted or reordered.
    Gap {
        tenant: String,
        expected: i64,
        found: i64,
    },
    /// The chain ends before (or differs from) the head written with its last append: the
    /// newest records were removed or replaced.
    HeadMismatch {
        tenant: String,
        head_seq: i64,
        last_seq: i64,
    },
}

impl std::fmt::Display for ChainProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Edited { tenant, seq } => {
                write!(
                    f,
                    "tenant {tenant}: record {seq} was edited (hash mismatch)"
                )
            }
            Self::BrokenLink { tenant, seq } => write!(
                f,
                "tenant {tenant}: record {seq} does not link to the record before it"
            ),
            Self::Gap {
                tenant,
                expected,
                found,
            } => write!(
                f,
                "tenant {tenant}: expected record {expected}, found {found} (deleted or reordered)"
            ),
            Self::HeadMismatch {
                tenant,
                head_seq,
                last_seq,
            } => write!(
                f,
                "tenant {tenant}: the chain ends at record {last_seq} but its head says {head_seq} (newest records removed or replaced)"
            ),
        }
    }
}

/// One tenant's chain as found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainSummary {
    pub tenant: String,
    pub records: i64,
    /// The last record's hash (keep it elsewhere to detect a rewrite of the whole file).
    pub head: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    pub chains: Vec<ChainSummary>,
    pub problems: Vec<ChainProblem>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Verifies `DATA/audit.db` (which must exist).
pub fn verify_data_dir(data_dir: &Path) -> Result<VerifyReport, AuditError> {
    let path = data_dir.join(AUDIT_DB);
    if !path.is_file() {
        return Err(AuditError::Open {
            path,
            source: rusqlite::Error::InvalidPath("no audit database here".into()),
        });
    }
    verify(&open_db(&path, false)?)
}

struct Row {
    tenant: String,
    seq: i64,
    at: String,
    kind: String,
    body: String,
    prev_hash: String,
    hash: String,
}

/// Verifies every chain in `db`.
pub fn verify(db: &Connection) -> Result<VerifyReport, AuditError> {
    let heads = read_heads(db)?;
    let mut stmt = db.prepare(
        "SELECT tenant, seq, at, kind, body, prev_hash, hash FROM audit ORDER BY tenant, seq, id",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(Row {
            tenant: r.get(0)?,
            seq: r.get(1)?,
            at: r.get(2)?,
            kind: r.get(3)?,
            body: r.get(4)?,
            prev_hash: r.get(5)?,
            hash: r.get(6)?,
        })
    })?;
    let mut report = VerifyReport::default();
    let mut walker: Option<Walker> = None;
    for row in rows {
        let row = row?;
        if walker.as_ref().is_none_or(|w| w.tenant != row.tenant) {
            if let Some(done) = walker.take() {
                done.finish(&heads, &mut report);
            }
            walker = Some(Walker::new(&row.tenant));
        }
        if let Some(w) = walker.as_mut() {
            w.step(&row, &mut report.problems);
        }
    }
    if let Some(done) = walker.take() {
        done.finish(&heads, &mut report);
    }
    for (tenant, (head_seq, _)) in &heads {
        if !report.chains.iter().any(|c| &c.tenant == tenant) {
            report.problems.push(ChainProblem::HeadMismatch {
                tenant: tenant.clone(),
                head_seq: *head_seq,
                last_seq: 0,
            });
        }
    }
    Ok(report)
}

fn read_heads(db: &Connection) -> Result<BTreeMap<String, (i64, String)>, AuditError> {
    let mut stmt = db.prepare("SELECT tenant, seq, hash FROM audit_heads")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The state of the walk along one tenant's chain.
struct Walker {
    tenant: String,
    expected_seq: i64,
    prev_hash: String,
    records: i64,
}

impl Walker {
    fn new(tenant: &str) -> Self {
        Self {
            tenant: tenant.into(),
            expected_seq: 1,
            prev_hash: GENESIS.into(),
            records: 0,
        }
    }

    fn step(&mut self, row: &Row, problems: &mut Vec<ChainProblem>) {
        let tenant = self.tenant.clone();
        if row.seq != self.expected_seq {
            problems.push(ChainProblem::Gap {
                tenant: tenant.clone(),
                expected: self.expected_seq,
                found: row.seq,
            });
        }
        if row.prev_hash != self.prev_hash {
            problems.push(ChainProblem::BrokenLink {
                tenant: tenant.clone(),
                seq: row.seq,
            });
        }
        let computed = Link {
            tenant: &row.tenant,
            seq: row.seq,
            at: &row.at,
            kind: &row.kind,
            body: &row.body,
            prev_hash: &row.prev_hash,
        }
        .hash();
        if computed != row.hash {
            problems.push(ChainProblem::Edited {
                tenant,
                seq: row.seq,
            });
        }
        // Carry on from what the record claims, so one tampered record is reported once
        // rather than breaking every link after it.
        self.expected_seq = row.seq + 1;
        self.prev_hash = row.hash.clone();
        self.records += 1;
    }

    fn finish(self, heads: &BTreeMap<String, (i64, String)>, report: &mut VerifyReport) {
        let last_seq = self.expected_seq - 1;
        match heads.get(&self.tenant) {
            Some((head_seq, head_hash))
                if *head_seq == last_seq && *head_hash == self.prev_hash => {}
            Some((head_seq, _)) => report.problems.push(ChainProblem::HeadMismatch {
                tenant: self.tenant.clone(),
                head_seq: *head_seq,
                last_seq,
            }),
            None => report.problems.push(ChainProblem::HeadMismatch {
                tenant: self.tenant.clone(),
                head_seq: 0,
                last_seq,
            }),
        }
        report.chains.push(ChainSummary {
            tenant: self.tenant,
            records: self.records,
            head: self.prev_hash,
        });
    }
}
