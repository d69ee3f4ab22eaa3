# quotagate: one image for the admission controller (`quotagate run`) and the cost
# controller (`quotagate cost-controller`). Build: docker build -t quotagate:0.1.0 .
# The base image is pinned by digest (python 3.11.10-slim-bookworm) and the dependencies
# by constraints.txt, so a rebuild installs exactly what was tested.
ARG BASE=python:3.11.10-slim-bookworm@sha256:5148c0e4bbb64271bca1d3322360ebf4bfb7564507ae32dd639322e4952a6b16

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY api ./api
COPY controller ./controller
COPY costcontroller ./costcontroller
RUN pip install --no-cache-dir --prefix=/install -c constraints.txt .

FROM ${BASE}
COPY --from=build /install /usr/local
RUN useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin quotagate
USER 65532:65532
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["quotagate"]
CMD ["run"]
