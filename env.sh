# `source env.sh` (after `make setup`): the project's venv, node tools and solc-js front for this shell.
_verity_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export PATH="$_verity_root/.venv/bin:$_verity_root/anvil/node_modules/.bin:$PATH"
export SOLCX_BINARY_PATH="$_verity_root/anvil/solc-bin"
unset _verity_root
