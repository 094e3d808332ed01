-- job_submit/lua for the Slurm harness's self-test (cluster_selftest.sh): a job whose SPANK
-- control environment holds DEMO_WANT=N (set by demo_spank.c's sbatch --demo=N) is given N
-- "demo" licenses. In Slurm 22.05 job_desc.spank_job_env is nil when empty, else a table of
-- "NAME=value" strings indexed from 0 (so pairs, not ipairs), without the SPANK_ prefix that
-- the prolog and epilog see; the plugin's option itself is there too, as
-- _SLURM_SPANK_OPTION_demo_demo=N.
function slurm_job_submit(job_desc, part_list, submit_uid)
	local env = job_desc.spank_job_env
	if env == nil then
		return slurm.SUCCESS
	end
	for _, kv in pairs(env) do
		local n = string.match(kv, "^DEMO_WANT=(%d+)$")
		if n ~= nil and tonumber(n) > 0 then
			local lic = job_desc.licenses
			if lic == nil or lic == "" then
				job_desc.licenses = "demo:" .. n
			else
				job_desc.licenses = lic .. ",demo:" .. n
			end
			slurm.log_info("demo: job of uid %u asks for demo:%s", submit_uid, n)
		end
	end
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end

return slurm.SUCCESS
