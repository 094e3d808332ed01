--[[
rgpu's part of a site's job_submit.lua (slurm.conf: JobSubmitPlugins=lua; docs/operator-guide.md,
"Slurm"). A job that asked for GPUs with --rgpu=N[:MEM] (the spank_rgpu plugin puts N:BYTES
into its control environment as SPANK_RGPU) takes N of the `rgpu` license, so that Slurm starts
it only when rgpu's cluster has the GPUs, and queues it (Reason=Licenses) until then. A site
with a job_submit.lua of its own calls rgpu_job_submit(job_desc) from its slurm_job_submit.
--]]

function rgpu_job_submit(job_desc)
	local env = job_desc.spank_job_env
	if env == nil then
		return slurm.SUCCESS
	end
	for _, v in pairs(env) do
		local n = string.match(v, "^SPANK_RGPU=(%d+):%d+$") or string.match(v, "^RGPU=(%d+):%d+$")
		if n ~= nil then
			local want = "rgpu:" .. n
			if job_desc.licenses == nil or job_desc.licenses == "" then
				job_desc.licenses = want
			elseif not string.find(job_desc.licenses, "rgpu") then
				job_desc.licenses = job_desc.licenses .. "," .. want
			end
			slurm.log_info("rgpu: job of uid %d takes %s", job_desc.user_id or -1, want)
			return slurm.SUCCESS
		end
	end
	return slurm.SUCCESS
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	return rgpu_job_submit(job_desc)
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end
