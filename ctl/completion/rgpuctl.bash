# bash completion for rgpuctl (docs/man/rgpuctl.1). Plain bash: it needs nothing from the
# bash-completion package. Install it as /usr/share/bash-completion/completions/rgpuctl, or
# source it from ~/.bashrc. tests/unit/docs/man_pages.sh checks it against rgpuctl --help.

_rgpuctl_files()
{
	compopt -o filenames 2>/dev/null # outside a real completion (the tests), not needed
	COMPREPLY=($(compgen -f -- "$1"))
}

_rgpuctl()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev= cmd= i=1 j
	local commands="run status jobs checkpoint checkpoints restore migrate drain undrain
		consolidate wake slurm help"
	local common="--server --cluster --admin-key --tls --tls-ca --tls-name --json --progress
		--help"
	COMPREPLY=()
	((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
	# --opt=VALUE: bash splits at '=' (COMP_WORDBREAKS); the option is the word before it
	if [[ $prev == = ]] && ((COMP_CWORD > 1)); then
		prev=${COMP_WORDS[COMP_CWORD - 2]}
	elif [[ $cur == = ]]; then
		cur=
	fi

	# the command: the first word, after an optional "--admin-key FILE"
	while ((i < COMP_CWORD)); do
		if [[ ${COMP_WORDS[i]} == --admin-key ]]; then
			((i += 2))
			continue
		fi
		cmd=${COMP_WORDS[i]}
		break
	done
	if [[ -z $cmd ]]; then
		if [[ $prev == --admin-key ]]; then
			_rgpuctl_files "$cur"
		elif [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--admin-key --help" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		fi
		return 0
	fi

	# run ... -- CMD ARGS: a command after "--", then its arguments (files)
	if [[ $cmd == run ]]; then
		for ((j = i + 1; j < COMP_CWORD; j++)); do
			[[ ${COMP_WORDS[j]} == -- ]] || continue
			if ((COMP_CWORD == j + 1)); then
				COMPREPLY=($(compgen -c -- "$cur" | sort -u))
			else
				_rgpuctl_files "$cur"
			fi
			return 0
		done
	fi

	# an option's argument
	case $prev in
	--cluster | --admin-key | --tls-ca | --key | --state | --lock | --write)
		_rgpuctl_files "$cur"
		return 0
		;;
	--log | -l)
		if [[ $cmd == run ]]; then
			COMPREPLY=($(compgen -W "none error warn info debug" -- "$cur"))
			return 0
		fi
		;;
	--server | -s | --to | --client-address | --tls-name | --tenant | -t | --need | \
		--rounds | --headroom | --keep | --settle | --gpus | --mem)
		return 0 # an address, a name or a number: nothing to offer
		;;
	esac

	# slurm place|release|licenses
	if [[ $cmd == slurm && $COMP_CWORD -eq $((i + 1)) && $cur != -* ]]; then
		COMPREPLY=($(compgen -W "place where release licenses" -- "$cur"))
		return 0
	fi

	# checkpoint verify CKPT / checkpoint rm CKPT
	if [[ $cmd == checkpoint && $COMP_CWORD -eq $((i + 1)) && $cur != -* ]]; then
		COMPREPLY=($(compgen -W "verify rm" -- "$cur"))
		return 0
	fi

	[[ $cur == -* ]] || return 0
	local opts
	case $cmd in
	run) opts="--server --cluster --need --state --key --tenant --log --tls --tls-ca
		--tls-name --help --" ;;
	status | jobs | checkpoint | checkpoints | undrain) opts=$common ;;
	restore) opts="$common --to --client-address" ;;
	migrate) opts="$common --to --client-address --cold --rounds" ;;
	drain) opts="$common --to --cold --rounds" ;;
	consolidate) opts="$common --dry-run --power-off --settle --headroom --keep --lock --state" ;;
	wake) opts="$common --lock --state" ;;
	slurm)
		case ${COMP_WORDS[i + 1]} in
		place) opts="$common --state --gpus --mem" ;;
		release | where) opts="$common --state" ;;
		licenses) opts="$common --state --write --reconfigure" ;;
		*) return 0 ;;
		esac
		;;
	*) return 0 ;;
	esac
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	return 0
}

complete -F _rgpuctl rgpuctl
