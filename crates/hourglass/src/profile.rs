//! The client config file: named profiles of a node's URL, API key and namespace, so that
//! `--profile prod` stands for three flags.
//!
//! ```toml
//! [profiles.prod]
//! url = "https://hourglass.internal:7070"
//! api_key = "hg_..."
//! namespace = "billing"
//! ```
//!
//! The file is read only when a profile is asked for (`--profile` or `HOURGLASS_PROFILE`), so a
//! broken file cannot break a command that does not use it. Nothing here ever prints an API key:
//! not the profile's `Debug`, not an error about the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Where the client config file is when `HOURGLASS_CLIENT_CONFIG` does not say.
const RELATIVE_PATH: &str = "hourglass/client.toml";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ClientFile {
    #[serde(default)]
    profiles: BTreeMap<String, Profile>,
}

/// One `[profiles.NAME]` table. Every key is optional; flags and environment variables override
/// each one.
#[derive(Deserialize, Default, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub url: Option<String>,
    pub api_key: Option<String>,
    pub namespace: Option<String>,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("namespace", &self.namespace)
            .finish()
    }
}

/// A mistake in how the command was asked for (here: a profile that cannot be used); `main`
/// exits with the usage code, 2, as for a bad flag.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// The client config file: `HOURGLASS_CLIENT_CONFIG`, else `$XDG_CONFIG_HOME/hourglass/client.toml`,
/// else `~/.config/hourglass/client.toml`. `None` when neither variable nor a home is set.
pub fn config_path() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(path) = var("HOURGLASS_CLIENT_CONFIG") {
        return Some(PathBuf::from(path));
    }
    if let Some(dir) = var("XDG_CONFIG_HOME").map(PathBuf::from)
        && dir.is_absolute()
    {
        return Some(dir.join(RELATIVE_PATH));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".config").join(RELATIVE_PATH))
}

/// The profile called `name` in the client config file.
pub fn load(name: &str) -> Result<Profile, Usage> {
    let path = config_path().ok_or_else(|| {
        Usage(format!(
            "profile {name:?}: no client config file (set HOURGLASS_CLIENT_CONFIG, or HOME for \
             ~/.config/{RELATIVE_PATH})"
        ))
    })?;
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Usage(format!(
            "profile {name:?}: cannot read the client config file {}: {e}",
            path.display()
        ))
    })?;
    find(&path, &text, name)
}

fn find(path: &Path, text: &str, name: &str) -> Result<Profile, Usage> {
    let mut file: ClientFile = toml::from_str(text).map_err(|e| parse_error(path, text, &e))?;
    file.profiles.remove(name).ok_or_else(|| {
        let known: Vec<&str> = file.profiles.keys().map(String::as_str).collect();
        let known = if known.is_empty() {
            "it has no [profiles.NAME] tables".to_string()
        } else {
            format!("it has {}", known.join(", "))
        };
        Usage(format!(
            "profile {name:?} is not in the client config file {} ({known})",
            path.display()
        ))
    })
}

/// `PATH:LINE: what is wrong`, on one line. Not the parser's own rendering: that quotes the
/// offending line, which may hold an API key. Quoted values in the message (serde names an
/// unexpected string value in double quotes) are left out for the same reason.
fn parse_error(path: &Path, text: &str, e: &toml::de::Error) -> Usage {
    let line = e.span().map(|span| {
        text.as_bytes()[..span.start.min(text.len())]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    });
    let mut message = String::new();
    let mut quoted = false;
    for c in e.message().trim().chars() {
        match c {
            '"' => {
                quoted = !quoted;
                if quoted {
                    message.push_str("\"…\"");
                }
            }
            '\n' => message.push_str("; "),
            _ if !quoted => message.push(c),
            _ => {}
        }
    }
    let at = match line {
        Some(line) => format!("{}:{line}", path.display()),
        None => path.display().to_string(),
    };
    Usage(format!("client config file {at}: {message}"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Profile, find};

    const FILE: &str = r#"
[profiles.prod]
url = "https://hourglass.example:7070"
api_key = "hg_secret_value"
namespace = "billing"

[profiles.local]
url = "http://127.0.0.1:7070"
"#;

    #[test]
    fn a_profile_is_found_by_name() {
        let prod = find(Path::new("c.toml"), FILE, "prod").unwrap();
        assert_eq!(prod.url.as_deref(), Some("https://hourglass.example:7070"));
        assert_eq!(prod.api_key.as_deref(), Some("hg_secret_value"));
        assert_eq!(prod.namespace.as_deref(), Some("billing"));
        let local = find(Path::new("c.toml"), FILE, "local").unwrap();
        assert_eq!(local.api_key, None);
    }

    #[test]
    fn a_missing_profile_names_the_ones_there() {
        let e = find(Path::new("c.toml"), FILE, "staging").unwrap_err();
        assert_eq!(
            e.0,
            "profile \"staging\" is not in the client config file c.toml (it has local, prod)"
        );
        let e = find(Path::new("c.toml"), "", "prod").unwrap_err();
        assert!(
            e.0.ends_with("(it has no [profiles.NAME] tables)"),
            "{}",
            e.0
        );
    }

    #[test]
    fn errors_and_debug_never_show_the_key() {
        // A typo'd key, a key at the wrong level, a wrong type: none may echo the secret.
        for text in [
            "[profiles.prod]\napikey = \"hg_secret_value\"\n",
            "[profiles]\napi_key = \"hg_secret_value\"\n",
            "[profiles.prod]\nurl = 1\napi_key = [\"hg_secret_value\"]\n",
            "[profiles.prod]\napi_key = \"hg_secret_value\n",
        ] {
            let e = find(Path::new("c.toml"), text, "prod").unwrap_err();
            assert!(!e.0.contains("hg_secret_value"), "{}", e.0);
            assert!(e.0.starts_with("client config file c.toml:"), "{}", e.0);
            assert!(!e.0.contains('\n'), "one line: {}", e.0);
        }
        let e = find(
            Path::new("c.toml"),
            "[profiles.prod]\napikey = \"x\"\n",
            "prod",
        )
        .unwrap_err();
        assert!(
            e.0.starts_with("client config file c.toml:2: unknown field"),
            "{}",
            e.0
        );
        let profile = Profile {
            api_key: Some("hg_secret_value".into()),
            ..Profile::default()
        };
        assert!(!format!("{profile:?}").contains("hg_secret_value"));
    }
}
