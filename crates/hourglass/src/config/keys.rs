//! The secrets keys' settings. The key in use, and while changing keys the one before it, are
//! each given one way of three, never two:
//!
//! - the key itself, 64 hex digits, in the environment (`HOURGLASS_SECRETS_KEY`);
//! - a file holding it (`secrets_key_file`);
//! - a data key wrapped by AWS KMS, base64, in the config file (`secrets_key_kms`) or the
//!   environment (`HOURGLASS_SECRETS_KEY_KMS`), unwrapped with one KMS `Decrypt` at start.
//!
//! Reading the settings ([`SecretsKeys::read`]) asks nothing of KMS, so every mistake in them is
//! found before a request is sent; [`SecretsKeys::open`] then asks KMS for the wrapped ones.

use std::path::Path;

use anyhow::bail;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hourglass_engine::sealing::{Sealing, SecretsKey};

use super::file::FileConfig;
use crate::kms::KmsError;

/// The names of one key's four settings.
struct Names {
    what: &'static str,
    hex_env: &'static str,
    file: &'static str,
    kms_file: &'static str,
    kms_env: &'static str,
}

const CURRENT: Names = Names {
    what: "the secrets key",
    hex_env: "HOURGLASS_SECRETS_KEY",
    file: "secrets_key_file",
    kms_file: "secrets_key_kms",
    kms_env: "HOURGLASS_SECRETS_KEY_KMS",
};

const PREVIOUS: Names = Names {
    what: "the previous secrets key",
    hex_env: "HOURGLASS_SECRETS_PREVIOUS_KEY",
    file: "secrets_previous_key_file",
    kms_file: "secrets_previous_key_kms",
    kms_env: "HOURGLASS_SECRETS_PREVIOUS_KEY_KMS",
};

/// One key, as given, and the setting that gave it (for the errors).
#[derive(Debug)]
struct Source {
    given: Given,
    setting: &'static str,
}

#[derive(Debug)]
enum Given {
    /// Boxed: a ring key is some 500 bytes, the other variant a pointer.
    Key(Box<SecretsKey>),
    /// A data key wrapped by KMS.
    Kms(Vec<u8>),
}

/// What the settings give: the key in use and the previous one, either maybe wrapped.
#[derive(Debug)]
pub(super) struct SecretsKeys {
    current: Option<Source>,
    previous: Option<Source>,
}

/// Marks a start refused because KMS could not be reached or could not answer now, rather than
/// for a setting that cannot work: `serve` exits 1 on it (restarted), not 78.
#[derive(Debug)]
pub struct KmsUnavailable;

impl std::fmt::Display for KmsUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AWS KMS is unavailable")
    }
}

impl SecretsKeys {
    /// The keys the environment (`env`: a variable's value, `None` when unset) and the config
    /// file give. A variable set to blanks counts as unset.
    pub(super) fn read(
        env: &dyn Fn(&str) -> Option<String>,
        file: &FileConfig,
    ) -> anyhow::Result<Self> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let current = source(
            &CURRENT,
            env(CURRENT.hex_env),
            file.secrets_key_file.as_deref(),
            file.secrets_key_kms.as_deref(),
            env(CURRENT.kms_env),
        )?;
        let previous = source(
            &PREVIOUS,
            env(PREVIOUS.hex_env),
            file.secrets_previous_key_file.as_deref(),
            file.secrets_previous_key_kms.as_deref(),
            env(PREVIOUS.kms_env),
        )?;
        if let (None, Some(previous)) = (&current, &previous) {
            bail!(
                "{}: a previous secrets key needs the one in use ({}, {}, {} or {})",
                previous.setting,
                CURRENT.file,
                CURRENT.hex_env,
                CURRENT.kms_file,
                CURRENT.kms_env
            );
        }
        Ok(Self { current, previous })
    }

    /// Whether a key comes wrapped by KMS (`open` will ask KMS).
    #[cfg(test)]
    pub(super) fn wrapped(&self) -> (bool, bool) {
        let wrapped = |s: &Option<Source>| {
            matches!(
                s,
                Some(Source {
                    given: Given::Kms(_),
                    ..
                })
            )
        };
        (wrapped(&self.current), wrapped(&self.previous))
    }

    /// The node's sealing: the keys as given, the wrapped ones unwrapped by KMS (one `Decrypt`
    /// each). An error names the setting; when KMS could not be reached it carries
    /// [`KmsUnavailable`].
    pub(super) async fn open(self) -> anyhow::Result<Option<Sealing>> {
        let previous_setting = self.previous.as_ref().map(|p| p.setting);
        let (current, previous) = (unwrap(self.current).await?, unwrap(self.previous).await?);
        match (current, previous) {
            (None, _) => Ok(None),
            (Some(current), Some(previous)) if current.id() == previous.id() => bail!(
                "{}: the previous secrets key is the one in use",
                previous_setting.unwrap_or(PREVIOUS.file)
            ),
            (Some(current), previous) => Ok(Some(Sealing::new(current, previous))),
        }
    }
}

/// One key from its four settings, at most one of them set.
fn source(
    names: &Names,
    hex_env: Option<String>,
    file: Option<&Path>,
    kms_file: Option<&str>,
    kms_env: Option<String>,
) -> anyhow::Result<Option<Source>> {
    let given: Vec<&str> = [
        hex_env.as_ref().map(|_| names.hex_env),
        file.map(|_| names.file),
        kms_file.map(|_| names.kms_file),
        kms_env.as_ref().map(|_| names.kms_env),
    ]
    .into_iter()
    .flatten()
    .collect();
    if given.len() > 1 {
        bail!(
            "{}: {} is given {} ways; give it one way only",
            given.join(" and "),
            names.what,
            given.len()
        );
    }
    let (given, setting) = if let Some(text) = hex_env {
        (hex(&text, names.hex_env)?, names.hex_env)
    } else if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!("config {}: cannot read {}: {e}", names.file, path.display())
        })?;
        (hex(&text, &format!("config {}", names.file))?, names.file)
    } else if let Some(text) = kms_file {
        (wrapped(text, names.kms_file)?, names.kms_file)
    } else if let Some(text) = kms_env {
        (wrapped(&text, names.kms_env)?, names.kms_env)
    } else {
        return Ok(None);
    };
    Ok(Some(Source { given, setting }))
}

fn hex(text: &str, from: &str) -> anyhow::Result<Given> {
    match SecretsKey::parse(text) {
        Some(key) => Ok(Given::Key(Box::new(key))),
        None => bail!("{from}: a secrets key is 64 hex digits (`hourglass key secrets` makes one)"),
    }
}

fn wrapped(text: &str, setting: &str) -> anyhow::Result<Given> {
    match BASE64.decode(text.trim()) {
        Ok(blob) if !blob.is_empty() => Ok(Given::Kms(blob)),
        _ => bail!(
            "{setting}: a data key wrapped by AWS KMS is the base64 of its CiphertextBlob \
             (`hourglass key secrets --kms-key-id KEY` makes one)"
        ),
    }
}

async fn unwrap(source: Option<Source>) -> anyhow::Result<Option<SecretsKey>> {
    let (blob, setting) = match source {
        None => return Ok(None),
        Some(Source {
            given: Given::Key(key),
            ..
        }) => return Ok(Some(*key)),
        Some(Source {
            given: Given::Kms(blob),
            setting,
        }) => (blob, setting),
    };
    let plaintext = match crate::kms::decrypt(blob).await {
        Ok(plaintext) => plaintext,
        Err(e @ KmsError::Unavailable(_)) => {
            return Err(
                anyhow::anyhow!("{setting}: cannot unwrap the secrets key: {e}")
                    .context(KmsUnavailable),
            );
        }
        Err(e) => bail!("{setting}: cannot unwrap the secrets key: {e}"),
    };
    match SecretsKey::from_bytes(&plaintext) {
        Some(key) => Ok(Some(key)),
        None => bail!(
            "{setting}: AWS KMS unwrapped a key of {} bytes, not 32 (make the data key with \
             KeySpec AES_256: `hourglass key secrets --kms-key-id KEY`)",
            plaintext.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn keys(env: &[(&str, &str)], file: &str) -> anyhow::Result<SecretsKeys> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let file: FileConfig = toml::from_str(file).unwrap();
        SecretsKeys::read(&|name| env.get(name).cloned(), &file)
    }

    fn error(env: &[(&str, &str)], file: &str) -> String {
        format!("{:#}", keys(env, file).expect_err("refused"))
    }

    /// base64 of a few bytes: what the settings take for a wrapped key (KMS is not asked here).
    const BLOB: &str = "AQIDBAUGBwg=";

    #[test]
    fn each_of_the_three_ways_gives_the_key_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.key");
        std::fs::write(&path, SecretsKey::generate()).unwrap();
        let file_line = format!("secrets_key_file = {:?}", path.to_str().unwrap());
        let hex = SecretsKey::generate();

        let none = keys(&[("HOURGLASS_SECRETS_KEY", "  ")], "").unwrap();
        assert!(none.current.is_none() && none.previous.is_none());
        for given in [
            keys(&[("HOURGLASS_SECRETS_KEY", &hex)], "").unwrap(),
            keys(&[], &file_line).unwrap(),
        ] {
            assert!(
                matches!(
                    given.current,
                    Some(Source {
                        given: Given::Key(_),
                        ..
                    })
                ),
                "{given:?}"
            );
            assert_eq!(given.wrapped(), (false, false));
        }
        let from_file = keys(&[], &format!("secrets_key_kms = {BLOB:?}")).unwrap();
        assert!(matches!(
            from_file.current,
            Some(Source { given: Given::Kms(ref blob), setting: "secrets_key_kms" }) if blob.len() == 8
        ));
        let from_env = keys(&[("HOURGLASS_SECRETS_KEY_KMS", BLOB)], "").unwrap();
        assert!(matches!(
            from_env.current,
            Some(Source {
                given: Given::Kms(_),
                setting: "HOURGLASS_SECRETS_KEY_KMS",
            })
        ));
        // The previous key may come another way than the one in use (moving to KMS).
        let moving = keys(
            &[("HOURGLASS_SECRETS_KEY_KMS", BLOB)],
            &file_line.replace("secrets_key_file", "secrets_previous_key_file"),
        )
        .unwrap();
        assert_eq!(moving.wrapped(), (true, false));
    }

    #[test]
    fn a_key_given_two_ways_is_refused_naming_both() {
        let hex = SecretsKey::generate();
        let kms_line = format!("secrets_key_kms = {BLOB:?}");
        for (env, file, named) in [
            (
                vec![("HOURGLASS_SECRETS_KEY", hex.as_str())],
                "secrets_key_file = \"/nowhere\"",
                ["HOURGLASS_SECRETS_KEY", "secrets_key_file"],
            ),
            (
                vec![("HOURGLASS_SECRETS_KEY", hex.as_str())],
                kms_line.as_str(),
                ["HOURGLASS_SECRETS_KEY", "secrets_key_kms"],
            ),
            (
                vec![("HOURGLASS_SECRETS_KEY_KMS", BLOB)],
                "secrets_key_file = \"/nowhere\"",
                ["secrets_key_file", "HOURGLASS_SECRETS_KEY_KMS"],
            ),
            (
                vec![("HOURGLASS_SECRETS_KEY_KMS", BLOB)],
                kms_line.as_str(),
                ["secrets_key_kms", "HOURGLASS_SECRETS_KEY_KMS"],
            ),
            (
                vec![
                    ("HOURGLASS_SECRETS_KEY", hex.as_str()),
                    ("HOURGLASS_SECRETS_KEY_KMS", BLOB),
                ],
                "",
                ["HOURGLASS_SECRETS_KEY", "HOURGLASS_SECRETS_KEY_KMS"],
            ),
            (
                vec![
                    ("HOURGLASS_SECRETS_KEY", hex.as_str()),
                    ("HOURGLASS_SECRETS_PREVIOUS_KEY", hex.as_str()),
                    ("HOURGLASS_SECRETS_PREVIOUS_KEY_KMS", BLOB),
                ],
                "",
                [
                    "HOURGLASS_SECRETS_PREVIOUS_KEY",
                    "HOURGLASS_SECRETS_PREVIOUS_KEY_KMS",
                ],
            ),
        ] {
            let text = error(&env, file);
            assert!(text.contains("one way only"), "{text}");
            for name in named {
                assert!(text.contains(name), "{name}: {text}");
            }
        }
        // Three at once: all three named.
        let text = error(
            &[
                ("HOURGLASS_SECRETS_KEY", &hex),
                ("HOURGLASS_SECRETS_KEY_KMS", BLOB),
            ],
            &kms_line,
        );
        assert!(text.contains("3 ways"), "{text}");
    }

    #[test]
    fn a_wrapped_key_that_is_not_base64_and_a_lone_previous_key_are_refused() {
        for (env, file, named) in [
            (
                vec![("HOURGLASS_SECRETS_KEY_KMS", "not base64!")],
                "",
                "HOURGLASS_SECRETS_KEY_KMS",
            ),
            (vec![], "secrets_key_kms = \"\"", "secrets_key_kms"),
            (vec![], "secrets_key_kms = \"AQI=x\"", "secrets_key_kms"),
            (
                vec![("HOURGLASS_SECRETS_KEY", "abc")],
                "",
                "HOURGLASS_SECRETS_KEY: a secrets key is 64 hex",
            ),
            (
                vec![("HOURGLASS_SECRETS_PREVIOUS_KEY_KMS", BLOB)],
                "",
                "HOURGLASS_SECRETS_PREVIOUS_KEY_KMS: a previous secrets key needs the one in use",
            ),
        ] {
            let text = error(&env, file);
            assert!(text.contains(named), "{named}: {text}");
        }
        let text = error(&[("HOURGLASS_SECRETS_KEY_KMS", "%%")], "");
        assert!(text.contains("base64 of its CiphertextBlob"), "{text}");
    }

    #[tokio::test]
    async fn the_same_key_as_current_and_previous_is_refused() {
        let hex = SecretsKey::generate();
        let keys = keys(
            &[
                ("HOURGLASS_SECRETS_KEY", &hex),
                ("HOURGLASS_SECRETS_PREVIOUS_KEY", &hex),
            ],
            "",
        )
        .unwrap();
        let text = format!("{:#}", keys.open().await.expect_err("refused"));
        assert!(
            text.contains("HOURGLASS_SECRETS_PREVIOUS_KEY: the previous secrets key is the one"),
            "{text}"
        );
    }
}
