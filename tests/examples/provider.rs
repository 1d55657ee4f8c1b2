//! The end-to-end tests' tag-to-digest provider as a process, for load runs
//! (`crates/webhook/load/external.sh`):
//!
//!     cargo run --release -p sartor-tests --example provider -- NAME CLIENT_CA.pem PROVIDER.yaml
//!
//! Serves HTTPS on a free port of 127.0.0.1, accepts client certificates
//! signed by CLIENT_CA.pem, writes its Provider object (named NAME) to
//! PROVIDER.yaml, and runs until killed.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, client_ca, out] = args.as_slice() else {
        eprintln!("usage: provider NAME CLIENT_CA.pem PROVIDER.yaml");
        return ExitCode::from(2);
    };
    let started = std::fs::read_to_string(client_ca)
        .map_err(|e| format!("{client_ca}: {e}"))
        .and_then(|ca| sartor_tests::provider::TestProvider::start(Some(&ca)))
        .and_then(|provider| {
            std::fs::write(out, provider.provider_yaml(name, 1))
                .map_err(|e| format!("{out}: {e}"))?;
            Ok(provider)
        });
    match started {
        Ok(provider) => {
            eprintln!("provider {name} at {}", provider.url());
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        Err(error) => {
            eprintln!("provider: {error}");
            ExitCode::FAILURE
        }
    }
}
