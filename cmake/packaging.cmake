# Debian packages (issue 15), made by CPack's DEB generator, one package per install component:
#   server -> rgpu-server  rgpud, rgpud.service, /etc/rgpu/rgpud.conf, rgpud(8), rgpud.conf(5)
#   client -> rgpu-client  rgpuctl, the interposer (off the loader's path), rgpuctl(1), completion
#   slurm  -> rgpu-slurm   the Slurm SPANK plugin, job_submit.lua, a plugstack.conf example
# The install() rules sit with what they install (server/, ctl/, interposer/); the man pages
# and the packages' settings are here. scripts/package.sh configures a build for /usr and runs
# cpack. Dependencies on Debian's libraries come from dpkg-shlibdeps.

# --- man pages: docs/man/NAME.N, gzip'ed to share/man/manN/NAME.N.gz --------------------------
# Whatever pages are there at configure time (CONFIGURE_DEPENDS: a page added later is picked
# up at the next build). rgpuctl* belong to the client, rgpud* to the server.
file(GLOB RGPU_MAN_PAGES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/man/*.[158])
set(man_gz)
foreach(page ${RGPU_MAN_PAGES})
  get_filename_component(name ${page} NAME)
  string(REGEX REPLACE ".*\\.([158])$" "\\1" section ${name})
  if(name MATCHES "^rgpuctl")
    set(comp client)
  elseif(name MATCHES "^rgpud")
    set(comp server)
  else()
    message(WARNING "docs/man/${name}: no package for it (rgpuctl* go to rgpu-client, rgpud* "
      "to rgpu-server); not installed")
    continue()
  endif()
  set(gz ${CMAKE_BINARY_DIR}/man/${name}.gz)
  # -n: no name or time stamp inside, so that the same page gives the same bytes
  add_custom_command(OUTPUT ${gz}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND gzip -9n -c ${page} > ${gz}
    DEPENDS ${page} COMMENT "gzip docs/man/${name}")
  list(APPEND man_gz ${gz})
  install(FILES ${gz} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT ${comp})
endforeach()
add_custom_target(man_pages ALL DEPENDS ${man_gz})

# --- CPack ------------------------------------------------------------------------------------
set(RGPU_PACKAGE_MAINTAINER
  "rgpu maintainers <maintainers@users.noreply.a-seed-5e814284.example>"
  CACHE STRING "Maintainer: field of the Debian packages")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rgpu)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${RGPU_PACKAGE_MAINTAINER})
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL server client slurm)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)         # NAME_VERSION-RELEASE_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${RGPU_PACKAGE_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)          # Depends: liblmdb0, libprotobuf-c1, ...
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)   # rgpu-slurm depends on rgpu-client
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME rgpu-server)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
# passwd: useradd and groupadd in the postinst
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS passwd)
set(pkgdir ${CMAKE_SOURCE_DIR}/packaging/debian/rgpu-server)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
  ${pkgdir}/conffiles ${pkgdir}/postinst ${pkgdir}/prerm ${pkgdir}/postrm)

set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME rgpu-client)
set(CPACK_DEBIAN_CLIENT_PACKAGE_SECTION utils)

set(CPACK_DEBIAN_SLURM_PACKAGE_NAME rgpu-slurm)
set(CPACK_DEBIAN_SLURM_PACKAGE_SECTION admin)
# slurmd and slurmstepd load the plugin (sbatch, srun and salloc too, for --rgpu)
set(CPACK_DEBIAN_SLURM_PACKAGE_RECOMMENDS "slurmd, slurm-client")

include(CPack)

# Each description: its first line is the synopsis, the rest the long description.
cpack_add_component(server DISPLAY_NAME "rgpu server"
  DESCRIPTION "GPU server of rgpu (rgpud)
rgpud runs the CUDA driver calls of programs on other machines (or in containers) on this
machine's GPUs: one worker process per job, per-tenant limits, checkpoints and live migration
of running jobs. Installed as the systemd service rgpud, run as the system user rgpu.")
cpack_add_component(client DISPLAY_NAME "rgpu client"
  DESCRIPTION "client of rgpu: rgpuctl and the libcuda.so.1 interposer
rgpuctl run starts an unmodified CUDA program with rgpu's libcuda.so.1 in front of it, which
sends its driver calls to an rgpud. The library lives in a folder of its own, off the dynamic
loader's path: it never replaces NVIDIA's driver for other programs. rgpuctl also shows
servers and jobs, and checkpoints, migrates and drains them.")
cpack_add_component(slurm DISPLAY_NAME "rgpu for Slurm" DEPENDS client
  DESCRIPTION "Slurm integration of rgpu: --rgpu=N[:MEM] for sbatch, srun and salloc
The SPANK plugin spank_rgpu.so gives a job's tasks GPUs of rgpu's servers (RGPU_SERVERS and
the interposer), reserved for the job while it runs; job_submit.lua makes the job wait for
the rgpu license, which rgpuctl slurm licenses keeps equal to the cluster's GPUs. Add the
plugin to plugstack.conf (an example is in /usr/share/rgpu/slurm).")
