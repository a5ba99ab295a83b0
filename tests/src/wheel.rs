//! A wheel the tests build themselves, for `pip install` without an index on the internet.

use std::path::Path;
use std::process::Command;

/// Writes a wheel of `tinypkg` 0.1 (one module) to `out`; returns its sha256 (hex).
pub fn build_wheel(out: &Path) -> String {
    const SCRIPT: &str = r#"
import base64, hashlib, sys, zipfile
files = {
    "tinypkg/__init__.py": b'VALUE = "served by the test index"\n',
    "tinypkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
    "tinypkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: cordon-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")
record.append("tinypkg-0.1.dist-info/RECORD,,")
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
    z.writestr("tinypkg-0.1.dist-info/RECORD", "\n".join(record) + "\n")
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())
"#;
    let out = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
