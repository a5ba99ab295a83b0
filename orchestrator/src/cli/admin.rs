//! `cordon admin`: operating a server's data directory. `tenant create NAME`, `key create
//! --tenant NAME` (prints the key once, as its last line) and `key revoke KEY_ID`.

use cordon::server::audit::{AdminAction, AdminAudit, AuditEvent, AuditLog};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use cordon::server::auth::new_key;
use cordon::server::quota::Quotas;
use cordon::server::store::{SqliteStore, Store};
use serde_json::Value;

#[derive(Debug, Args)]
pub struct AdminArgs {
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Tenants: who sessions belong to.
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// API keys of a tenant.
    #[command(subcommand)]
    Key(KeyCommand),
}

#[derive(Debug, Subcommand)]
enum TenantCommand {
    /// Adds a tenant, with its managed settings and quotas.
    Create {
        /// Letters, digits, '-' and '_' (it names the tenant's workspace directory).
        name: String,
        #[arg(long)]
        data: PathBuf,
        /// The tenant's managed settings (JSON in Claude Code's shape, or a file): the top
        /// layer of its sessions' settings, which a session cannot override.
        #[arg(long)]
        settings: Option<String>,
        /// The tenant's quotas as JSON, e.g. '{"max_sessions": 10, "exec_per_minute": 60}'.
        #[arg(long)]
        quotas: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Makes a key for a tenant; prints its id, then the key itself (shown only once).
    Create {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        data: PathBuf,
    },
    /// Revokes a key by its id.
    Revoke {
        key_id: String,
        #[arg(long)]
        data: PathBuf,
    },
}

pub fn main(args: AdminArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cordon admin: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn json_arg(arg: Option<&str>, what: &str) -> anyhow::Result<Value> {
    let Some(arg) = arg else {
        return Ok(Value::Object(Default::default()));
    };
    let text = if arg.trim_start().starts_with('{') {
        arg.to_string()
    } else {
        std::fs::read_to_string(arg).with_context(|| format!("reading {what} from {arg}"))?
    };
    serde_json::from_str(&text).with_context(|| format!("{what} is not valid JSON"))
}

/// Records an operator's action in the tenant's audit chain (`actor` "cli").
fn audit(
    data: &std::path::Path,
    tenant: &str,
    action: AdminAction,
    target: &str,
) -> anyhow::Result<()> {
    let log = AuditLog::open(data).context("opening the audit log")?;
    log.append(
        tenant,
        &AuditEvent::Admin(AdminAudit {
            actor: "cli".into(),
            action,
            target: target.into(),
        }),
    )
    .context("writing the audit record")?;
    Ok(())
}

fn valid_tenant(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn run(args: AdminArgs) -> anyhow::Result<()> {
    match args.command {
        AdminCommand::Tenant(TenantCommand::Create {
            name,
            data,
            settings,
            quotas,
        }) => {
            if !valid_tenant(&name) {
                bail!("a tenant name is 1 to 64 letters, digits, '-' or '_'");
            }
            let settings = json_arg(settings.as_deref(), "the settings")?;
            cordon::settings::validate::check(&settings)
                .map_err(|problem| anyhow::anyhow!("the settings are invalid: {problem}"))?;
            let quotas = json_arg(quotas.as_deref(), "the quotas")?;
            serde_json::from_value::<Quotas>(quotas.clone()).context("the quotas are invalid")?;
            let store = SqliteStore::open(&data).context("opening the database")?;
            store.create_tenant(&name, &settings, &quotas)?;
            audit(&data, &name, AdminAction::TenantCreate, &name)?;
            println!("tenant {name} created");
        }
        AdminCommand::Key(KeyCommand::Create { tenant, data }) => {
            let store = SqliteStore::open(&data).context("opening the database")?;
            let key = new_key(&tenant);
            store.add_key(&key.row)?;
            audit(&data, &tenant, AdminAction::KeyCreate, &key.row.id)?;
            println!("key id {} for tenant {tenant}", key.row.id);
            println!("{}", key.key);
        }
        AdminCommand::Key(KeyCommand::Revoke { key_id, data }) => {
            let store = SqliteStore::open(&data).context("opening the database")?;
            store.revoke_key(&key_id)?;
            if let Some(row) = store.key(&key_id)? {
                audit(&data, &row.tenant, AdminAction::KeyRevoke, &key_id)?;
            }
            println!("key {key_id} revoked");
        }
    }
    Ok(())
}
