# quotagate: one image for the admission controller (`quotagate run`) and the cost
# controller (`quotagate cost-controller`). Build: docker build -t quotagate:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY api ./api
COPY controller ./controller
COPY costcontroller ./costcontroller
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
RUN useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin quotagate
USER 65532:65532
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["quotagate"]
CMD ["run"]
