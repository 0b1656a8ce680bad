// How narwhal runs its own Python helpers on a node (the bind test, the model manifest, the process-table
// scans over ssh, the attestation sidecar): each needs only the standard library, so each runs isolated
// (-I: no PYTHON* variables, no user site directory, not the script's directory on sys.path) and without
// the site module (-S: no site-packages, and none of their .pth files runs). What the node's Python
// environment holds cannot change what a helper concludes or serves (a json.py on PYTHONPATH shadowed the
// standard library's), and a helper starts in a fraction of the time where .pth files import packages
// at every start (this machine's pyenv imports certifi: 0.09 against 0.01 s of CPU per start).
export const STDLIB_PYTHON = ["python3", "-I", "-S"] as const;

/** The same, as the start of a shell command line. */
export const STDLIB_PYTHON_SH = STDLIB_PYTHON.join(" ");
