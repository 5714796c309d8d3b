package contracts

import "strings"

// This file is owned by the policy engineer (policy/ uses it on every
// run_command). The contracts loader should call ReservedEnvName to reject
// such names in commands.env.pass, so that the list lives in one place.

// reservedEnvNames are variables that change how a shell, a loader, an
// interpreter or a common tool finds or runs code. The agent may never set
// them, even if a contract lists them in commands.env.pass.
var reservedEnvNames = map[string]bool{
	"PATH": true, "IFS": true, "PS4": true, "PS1": true, "PS2": true, "PS0": true,
	"ENV": true, "BASH_ENV": true, "PROMPT_COMMAND": true, "SHELLOPTS": true,
	"BASHOPTS": true, "SHELL": true, "CDPATH": true, "GLOBIGNORE": true,
	"HISTFILE": true, "INPUTRC": true, "TERMINFO": true, "TERMCAP": true,
	"HOME": true, "TMPDIR": true, "OLDPWD": true, "PWD": true, "EXECIGNORE": true,
	"PAGER": true, "MANPAGER": true, "MANOPT": true, "EDITOR": true, "VISUAL": true,
	"BROWSER": true, "LESSOPEN": true, "LESSCLOSE": true, "LESSKEY": true,
	"LESS": true, "LESSSECURE": true, "SSH_ASKPASS": true, "SUDO_ASKPASS": true,
	"SSH_AUTH_SOCK": true, "GCONV_PATH": true, "LOCPATH": true, "NLSPATH": true,
	"HOSTALIASES": true, "RESOLV_HOST_CONF": true, "RES_OPTIONS": true,
	"LOCALDOMAIN": true, "TZDIR": true, "MALLOC_CHECK_": true, "GETCONF_DIR": true,
	"NODE_OPTIONS": true, "NODE_PATH": true, "NODE_EXTRA_CA_CERTS": true,
	"PYTHONSTARTUP": true, "PYTHONHOME": true, "PYTHONINSPECT": true,
	"PYTHONEXECUTABLE": true, "PYTHONUSERBASE": true, "PYTHONBREAKPOINT": true,
	"PERL5OPT": true, "PERL5LIB": true, "PERLLIB": true, "PERL5DB": true,
	"RUBYOPT": true, "RUBYLIB": true, "JAVA_TOOL_OPTIONS": true,
	"_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true, "CLASSPATH": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "NO_PROXY": true,
	"http_proxy": true, "https_proxy": true, "all_proxy": true, "no_proxy": true,
	"CURL_HOME": true, "WGETRC": true, "NPM_CONFIG_USERCONFIG": true,
	"PIP_CONFIG_FILE": true, "PIP_INDEX_URL": true, "PIP_EXTRA_INDEX_URL": true,
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "XDG_CONFIG_HOME": true,
	"XDG_CONFIG_DIRS": true, "XDG_DATA_HOME": true, "ZDOTDIR": true,
	"MAKEFLAGS": true, "MFLAGS": true, "GNUMAKEFLAGS": true,
	"SSH_ASKPASS_REQUIRE": true, "HGRCPATH": true, "PYTHONWARNINGS": true,
	"DOCKER_HOST": true, "KUBECONFIG": true, "AWS_CONFIG_FILE": true,
	"AWS_SHARED_CREDENTIALS_FILE": true, "OPENSSL_CONF": true, "OPENSSL_ENGINES": true,
	"SSLKEYLOGFILE": true, "GOFLAGS": true, "GOTOOLCHAIN": true, "RUSTC_WRAPPER": true,
	"RUSTC_WORKSPACE_WRAPPER": true, "RUSTC": true, "RUSTDOC": true, "MAVEN_OPTS": true,
	"GRADLE_OPTS": true, "LUA_INIT": true, "LUA_PATH": true, "LUA_CPATH": true,
	"PHPRC": true, "PHP_INI_SCAN_DIR": true, "VIMINIT": true, "EXINIT": true,
	"MYVIMRC": true, "GVIMINIT": true, "EMACSLOADPATH": true, "NETRC": true,
}

// reservedEnvPrefixes are families of variables with the same risk: dynamic
// loader and git settings, every *_PAGER, npm and pip configuration.
var reservedEnvPrefixes = []string{
	"LD_", "DYLD_", "GIT_", "BASH_FUNC_", "NPM_CONFIG_", "npm_config_", "PIP_",
	"PYTHONMALLOC", "GLIBC_", "MALLOC_",
}

// ReservedEnvName reports whether name is an environment variable the agent
// may never set, whatever the contract's commands.env.pass says: loader and
// interpreter hooks (LD_*, DYLD_*, NODE_OPTIONS, PYTHONSTARTUP ...), shell
// start-up and parsing (BASH_ENV, ENV, IFS, PROMPT_COMMAND ...), PATH, HOME,
// git's GIT_* and every pager or editor a tool may spawn (PAGER, *_PAGER,
// EDITOR ...). Names are case-sensitive, as in the environment itself, except
// that a lower-case spelling of a reserved upper-case name is reserved too.
func ReservedEnvName(name string) bool {
	if reservedEnvNames[name] || reservedEnvNames[strings.ToUpper(name)] {
		return true
	}
	upper := strings.ToUpper(name)
	if strings.HasSuffix(upper, "_PAGER") || strings.HasSuffix(upper, "PAGER") ||
		strings.HasSuffix(upper, "_EDITOR") || strings.HasSuffix(upper, "_ASKPASS") {
		return true
	}
	for _, p := range reservedEnvPrefixes {
		if strings.HasPrefix(upper, strings.ToUpper(p)) {
			return true
		}
	}
	return false
}
