# make install / make uninstall: the tools, libtfc.a, libtfc.so (soname libtfc.so.0), the
# public header with the module headers it includes, tfc.pc and the docs, under
# $(DESTDIR)$(PREFIX) (docs/embedding.md). `cc app.c $(pkg-config --cflags --libs tfc)` then
# builds a program; `--static` adds what libtfc.a needs.
PREFIX     ?= /usr/local
DESTDIR    ?=
SOVERSION  := 0
LIBDIR     := $(PREFIX)/lib
INCDIR     := $(PREFIX)/include
DOCDIR     := $(PREFIX)/share/doc/tfc
# The module headers include/tfc.h reaches (core/error.h, graph/model.h, ...), as the
# compiler finds them: installed under include/tfc/ with their src/ paths.
PUBLIC_HEADERS = $(patsubst src/%,%,$(filter src/%.h,$(subst \ , ,$(shell \
                   $(CC) -Iinclude -Isrc $(filter -D%,$(CPPFLAGS_ALL)) -MM include/tfc.h))))
# pkg-config: the libraries with a .pc file go to Requires.private, the rest (OpenBLAS's
# OpenMP build by path, CUDA, MPI, libm, OpenMP) to Libs.private.
PC_REQUIRES := yaml-0.1 jansson libpng libjpeg zlib
PC_PRIVATE   = $(filter-out -lyaml -ljansson -lpng -ljpeg -lz,$(LDLIBS_ALL)) -fopenmp
# A DEBUG=1 library is built with ASan and UBSan: programs must link their runtimes first.
PC_LIBS_SAN  = $(if $(filter 1,$(DEBUG)),$(SAN))

.PHONY: install uninstall
install: all
	$(Q)install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR)/tfc \
	    $(DESTDIR)$(DOCDIR)/examples
	$(Q)install -m 755 $(TOOLS) $(DESTDIR)$(PREFIX)/bin/
	$(Q)install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/libtfc.a
	$(Q)install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/libtfc.so.$(VERSION)
	$(Q)ln -sf libtfc.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libtfc.so.$(SOVERSION)
	$(Q)ln -sf libtfc.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libtfc.so
	$(Q)install -m 644 include/tfc.h $(DESTDIR)$(INCDIR)/tfc.h
	$(Q)for h in $(PUBLIC_HEADERS); do install -D -m 644 src/$$h $(DESTDIR)$(INCDIR)/tfc/$$h || exit 1; done
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	    'Name: tfc' 'Description: a declarative neural-network trainer; C inference API (tfc_predictor)' \
	    'Version: $(VERSION)' 'Requires.private: $(PC_REQUIRES)' 'Libs: -L$${libdir} -ltfc$(if $(PC_LIBS_SAN), $(PC_LIBS_SAN))' \
	    'Libs.private: $(strip $(PC_PRIVATE))' 'Cflags: -I$${includedir} -I$${includedir}/tfc' \
	    > $(DESTDIR)$(LIBDIR)/pkgconfig/tfc.pc
	$(Q)install -m 644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	$(Q)install -m 644 examples/*.c $(DESTDIR)$(DOCDIR)/examples/
	@echo "installed tfc $(VERSION) under $(DESTDIR)$(PREFIX)"

uninstall:
	$(Q)rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(TOOLS))) \
	    $(DESTDIR)$(LIBDIR)/libtfc.a $(DESTDIR)$(LIBDIR)/libtfc.so $(DESTDIR)$(LIBDIR)/libtfc.so.$(SOVERSION) \
	    $(DESTDIR)$(LIBDIR)/libtfc.so.$(VERSION) $(DESTDIR)$(LIBDIR)/pkgconfig/tfc.pc $(DESTDIR)$(INCDIR)/tfc.h
	$(Q)rm -rf $(DESTDIR)$(INCDIR)/tfc $(DESTDIR)$(DOCDIR)
	@echo "removed tfc from $(DESTDIR)$(PREFIX)"
