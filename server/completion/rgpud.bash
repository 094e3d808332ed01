# bash completion for rgpud (docs/man/rgpud.8). Plain bash: it needs nothing from the
# bash-completion package. Install it as /usr/share/bash-completion/completions/rgpud, or
# source it from ~/.bashrc. tests/unit/docs/man_pages.sh checks it against rgpud --help.

_rgpud()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=
	COMPREPLY=()
	((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
	# --opt=VALUE: bash splits at '=' (COMP_WORDBREAKS); the option is the word before it
	if [[ $prev == = ]] && ((COMP_CWORD > 1)); then
		prev=${COMP_WORDS[COMP_CWORD - 2]}
	elif [[ $cur == = ]]; then
		cur=
	fi
	case $prev in
	--config | --socket)
		# a file, or none
		compopt -o filenames 2>/dev/null
		COMPREPLY=($(compgen -W none -- "$cur") $(compgen -f -- "$cur"))
		return 0
		;;
	--keys | -k | --data | --state-dir | -s)
		compopt -o filenames 2>/dev/null
		COMPREPLY=($(compgen -d -- "$cur"))
		return 0
		;;
	--admin-key | --tls-cert | --tls-key | --peer-tls-ca | --driver | -d | --port-file | \
		--admin-port-file | --metrics-port-file | --replay | --log-file)
		compopt -o filenames 2>/dev/null
		COMPREPLY=($(compgen -f -- "$cur"))
		return 0
		;;
	--log-level | -v)
		COMPREPLY=($(compgen -W "error warn info debug none" -- "$cur"))
		return 0
		;;
	--admin)
		COMPREPLY=($(compgen -W none -- "$cur"))
		return 0
		;;
	--listen | -l | --metrics | --window | -w | --staging | --module-cache-bytes | \
		--barrier-timeout | --resume-grace | --hello-timeout | --frame-timeout | \
		--max-queued | --max-sessions | --idle-timeout)
		return 0 # an address, a size or a number: nothing to offer
		;;
	esac
	[[ $cur == -* ]] || return 0
	COMPREPLY=($(compgen -W "--config --listen --socket --keys --admin-key --tls-cert
		--tls-key --tls --no-tls --insecure --peer-tls-ca --driver --data --state-dir
		--window --staging --module-cache-bytes --barrier-timeout --port-file --admin
		--admin-port-file --metrics --metrics-port-file --resume-grace --hello-timeout
		--frame-timeout --max-queued --max-sessions --idle-timeout --log-level --log-file
		--replay --help --version" -- "$cur"))
	return 0
}

complete -F _rgpud rgpud
